//go:build e2enodes

package e2enodes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// graceScript traps SIGTERM and from then on writes, every 100 ms, the uptime at SIGTERM and the
// latest uptime into a file of the node named after the pod, so that once SIGKILL ends it the
// file says how long the container had.
const graceScript = `f=/out/$POD_NAME
trap 'read t0 _ </proc/uptime; while :; do read t _ </proc/uptime; echo "$t0 $t" >$f.tmp && mv $f.tmp $f; sleep 0.1; done' TERM
echo ready
while :; do sleep 1 & wait $!; done`

// graceDir is where graceScript's files land on the node.
const graceDir = "/var/lib/fairway-grace"

// TestReclaimGrace: a borrowing queue's training pods (terminationGracePeriodSeconds 7) fill a
// node; a queue owed its quota claims a GPU; fairway reclaims one borrower through the Eviction
// API, and that pod's container, which traps SIGTERM, lives its full 7 seconds before the
// kubelet's SIGKILL. The kwok tier sees the eviction request carry 7 s in the audit log, but
// kwok deletes a terminating pod at once: only a kubelet sends the signals and waits.
func TestReclaimGrace(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{})
	ns := nodes.StartT(t, c, nodes.Config{Count: 1, Labels: h100Labels()})
	node := ns.Nodes[0]
	startScheduler(t, c)
	for _, n := range []string{"grace-a", "grace-b"} {
		newNamespace(t, c, n)
	}
	queue(t, c, "grace-a", "8", "grace-a")
	queue(t, c, "grace-b", "", "grace-b")

	const grace = 7
	borrower := onNode(withGPUs(fairwayPod("grace-b", "long", "grace-b", graceScript), 1), node.Name)
	borrower.Spec.TerminationGracePeriodSeconds = ptr.To[int64](grace)
	borrower.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	borrower.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	borrower.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: graceDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	mustCreate(t, c, replicaSetOf(borrower, 8))
	eventually(t, 3*time.Minute, "the borrower's 8 pods running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, c, "grace-b") == 8, nil
	})

	mustCreate(t, c, onNode(withGPUs(fairwayPod("grace-a", "claim", "grace-a", "echo claimed; exec sleep 3600"), 1), node.Name))
	// The claimant can only start once the victim is gone: 7 s after SIGTERM.
	start := time.Now()
	waitPhase(t, c, "grace-a", "claim", corev1.PodRunning, 2*time.Minute)
	t.Logf("claimant running %s after it was created", time.Since(start).Round(100*time.Millisecond))

	// graceScript's temporary file stays where SIGKILL came between its write and its rename.
	out, err := node.Exec(t.Context(), "sh", "-c", "cd "+graceDir+" && for f in long-*; do case \"$f\" in *.tmp) continue;; esac; [ -f \"$f\" ] && echo \"$f $(cat $f)\"; done")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || lines[0] == "" {
		t.Fatalf("want exactly one borrower that got SIGTERM, the node's %s has:\n%s", graceDir, out)
	}
	var pod string
	var t0, t1 float64
	if _, err := fmt.Sscanf(lines[0], "%s %g %g", &pod, &t0, &t1); err != nil {
		t.Fatalf("parsing %q: %v", lines[0], err)
	}
	had := t1 - t0
	t.Logf("victim %s lived %.1fs after SIGTERM (terminationGracePeriodSeconds %d)", pod, had, grace)
	if had < grace-1.5 || had > grace+1 {
		t.Errorf("victim %s lived %.1fs between SIGTERM and SIGKILL; want its own %d s", pod, had, grace)
	}
	// The kubelet deletes the pod object once it has reported the containers gone; that can trail
	// the device's release (and the claimant's start) by a moment on a loaded host.
	eventually(t, 30*time.Second, "victim "+pod+" deleted", func(ctx context.Context) (bool, error) {
		_, err := getPod(ctx, c, "grace-b", pod)
		return apierrors.IsNotFound(err), nil
	})
}

func countRunning(ctx context.Context, c *cluster.Cluster, namespace string) int {
	list, err := c.Clientset().CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}
