package chart

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// TestRenderedArgsParse runs the fairway binary with the arguments each of the chart's containers
// gets, plus --help: cobra parses every flag before it prints help, so a value the binary
// refuses fails here rather than in a crash-looping pod. The kwok tier runs the components with
// arguments of its own, and helm template checks only the YAML: the chart's default
// --zap-log-level=0, which controller-runtime refuses, passed both and crashed the scheduler and
// every agent installed on real nodes (test/e2enodes TestChartOnRealNodes).
func TestRenderedArgsParse(t *testing.T) {
	needHelm(t)
	bin, err := fairwayproc.BuildFromSource(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logLevels := Options{Set: []string{"scheduler.logLevel=2", "webhook.logLevel=2", "agent.logLevel=2"}}
	for name, o := range map[string]Options{"defaults": {}, "all options": allOptions, "log levels": logLevels} {
		t.Run(name, func(t *testing.T) {
			r := render(t, o)
			var pods []corev1.PodSpec
			for _, d := range []string{"fairway-scheduler", "fairway-webhook", "fairway-console"} {
				if obj := r.Find("Deployment", d); obj != nil || d != "fairway-console" {
					pods = append(pods, into[appsv1.Deployment](t, obj).Spec.Template.Spec)
				}
			}
			pods = append(pods, into[appsv1.DaemonSet](t, r.Find("DaemonSet", "fairway-agent")).Spec.Template.Spec)
			for _, spec := range pods {
				for _, c := range spec.Containers {
					out, err := exec.Command(bin, append(append(c.Command, c.Args...), "--help")...).CombinedOutput()
					if err != nil || !strings.Contains(string(out), "Usage:") {
						t.Errorf("container %s: fairway %s --help: %v\n%s", c.Name, strings.Join(c.Args, " "), err, out)
					}
				}
			}
		})
	}
}
