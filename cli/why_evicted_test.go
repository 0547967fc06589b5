package cli_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
)

// `fairway why` tells the last of fairway's evictions of the pod, or of the gang's pods, from the
// events on them (by their reason, never their note): which pod, how long ago, why, and for
// whom; events of other kinds, and evictions of other pods, are not taken.
func TestWhyLastEviction(t *testing.T) {
	serve := &corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "serve-6cc45dbb8-q8fk7"}
	event := func(name, pod, reason, note string, ago time.Duration, related *corev1.ObjectReference) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			EventTime: metav1.NewMicroTime(clitest.Now.Add(-ago)), Reason: reason, Note: note, Type: corev1.EventTypeNormal,
			ReportingController: fairwayv1.SchedulerName, ReportingInstance: "fairway-0", Action: "Evict",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: pod}, Related: related}
	}
	preempted := "Preempted by pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve) of priority 100 in queue team-a (this pod has priority 50)"
	objs := append(clitest.Nodes(), clitest.Objects()...)
	objs = append(objs,
		event("e1", "train-llama-0", string(fairwayv1.EvictReclaim), "Reclaimed for gang team-b/x of queue team-b", 10*time.Minute, nil),
		event("e2", "train-llama-1", string(fairwayv1.EvictPreempt), preempted, 3*time.Minute, serve),
		event("e3", "train-llama-1", "Scheduled", "bound", time.Minute, nil),
		event("e4", "nb-carol", string(fairwayv1.EvictPreempt), "Preempted by someone else", 30*time.Second, nil),
	)
	c := fake.NewClientBuilder().WithScheme(cli.Scheme()).WithObjects(objs...).
		WithStatusSubresource(&fairwayv1.Queue{}, &fairwayv1.PodGroup{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	base := cli.Options{Client: c, Now: func() time.Time { return clitest.Now }}
	want := "Evicted:    train-llama-1 3m ago (Preempt): " + preempted + "\n"
	for _, args := range [][]string{{"why", "train-llama", "-n", "team-a"}, {"why", "pod/train-llama-1", "-n", "team-a"}} {
		out, err := execute(t, base, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("fairway %s:\n%s\nwant the line %q", strings.Join(args, " "), out, want)
		}
	}
	out, err := execute(t, base, "why", "pod/train-llama-0", "-n", "team-a", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"reason": "Reclaim"`) || !strings.Contains(out, `"agoSeconds": 600`) {
		t.Errorf("why -o json on train-llama-0:\n%s\nwant its Reclaim 600s ago", out)
	}
	out, err = execute(t, base, "why", "pod/train-llama-1", "-n", "team-a", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"by": {`) || !strings.Contains(out, `"name": "serve-6cc45dbb8-q8fk7"`) {
		t.Errorf("why -o json on train-llama-1:\n%s\nwant the eviction by pod serve-6cc45dbb8-q8fk7", out)
	}
	// A pod fairway never evicted has no Evicted line.
	out, err = execute(t, base, "why", "pod/nb-bob", "-n", "team-b")
	if err != nil || strings.Contains(out, "Evicted:") {
		t.Errorf("why nb-bob: %v\n%s\nwant no Evicted line", err, out)
	}
}

// `fairway why` on a Deployment's new replica tells the eviction of the replica it replaced:
// that one is gone and had another name, and the new one is what a user finds. A replica that
// was there before the eviction tells none.
func TestWhyEvictionOfReplacedReplica(t *testing.T) {
	replica := func(name string, created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, GenerateName: "serve-6cc45dbb8-",
			CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{fairwayv1.QueueLabel: "team-a"}},
			Spec: corev1.PodSpec{SchedulerName: fairwayv1.SchedulerName, Containers: []corev1.Container{{Name: "vllm"}}}}
	}
	evictedAt := clitest.Now.Add(-3 * time.Minute)
	reclaimed := "Reclaimed for gang team-b/x (training PyTorchJob x) of queue team-b, which is below its guaranteed quota; queue team-a holds 20 GPU, above its guaranteed quota of 16"
	objs := append(clitest.Nodes(), clitest.Objects()...)
	objs = append(objs,
		replica("serve-6cc45dbb8-x2v9d", evictedAt.Add(time.Second)),
		replica("serve-6cc45dbb8-a1b2c", evictedAt.Add(-time.Hour)),
		&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "team-a"},
			EventTime: metav1.NewMicroTime(evictedAt), Reason: string(fairwayv1.EvictReclaim), Note: reclaimed, Type: corev1.EventTypeNormal,
			ReportingController: fairwayv1.SchedulerName, ReportingInstance: "fairway-0", Action: "Evict",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "serve-6cc45dbb8-q8fk7"}},
	)
	c := fake.NewClientBuilder().WithScheme(cli.Scheme()).WithObjects(objs...).
		WithStatusSubresource(&fairwayv1.Queue{}, &fairwayv1.PodGroup{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	base := cli.Options{Client: c, Now: func() time.Time { return clitest.Now }}
	out, err := execute(t, base, "why", "serve-6cc45dbb8-x2v9d", "-n", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	want := "Evicted:    serve-6cc45dbb8-q8fk7 (gone, replaced by serve-6cc45dbb8-x2v9d) 3m ago (Reclaim): " + reclaimed + "\n"
	if !strings.Contains(out, want) {
		t.Errorf("why on the new replica:\n%s\nwant the line %q", out, want)
	}
	out, err = execute(t, base, "why", "serve-6cc45dbb8-a1b2c", "-n", "team-a")
	if err != nil || strings.Contains(out, "Evicted:") {
		t.Errorf("why on the replica older than the eviction: %v\n%s\nwant no Evicted line", err, out)
	}
}
