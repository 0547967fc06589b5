//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestStack runs the whole product the way a user meets it: a plain pod asking for half a GPU
// by annotation goes through the webhook, is placed on a GPU by the scheduler, which holds the
// GPU with a reservation pod, and gets the UUID the gpu-agent learnt from the kubelet's
// PodResources API in its GPU ConfigMap.
func TestStack(t *testing.T) {
	t.Parallel()
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(1)}, Logger: testr.New(t)})
	ctx := t.Context()
	newNamespace(t, c, "team-s")
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-s"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{"team-s"}}}
	mustCreate(t, c, q)

	s, err := stack.Start(ctx, c, stack.Options{ProbeNamespace: "team-s", Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "half", Namespace: "team-s",
			Annotations: map[string]string{fairwayv1.GPUFractionAnnotation: "0.5", cluster.CompleteDelayAnnotation: "1h"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	mustCreate(t, c, pod)

	var got corev1.Pod
	eventually(t, 60*time.Second, "the half-GPU pod bound with a GPU UUID", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			return false, err
		}
		return got.Spec.NodeName != "" && got.Annotations[fairwayv1.GPUUUIDAnnotation] != "", nil
	})
	if got.Spec.SchedulerName != fairwayv1.SchedulerName || got.Labels[fairwayv1.QueueLabel] != "team-s" {
		t.Errorf("webhook did not hand the pod to fairway: scheduler %q, queue %q", got.Spec.SchedulerName, got.Labels[fairwayv1.QueueLabel])
	}
	uuid := got.Annotations[fairwayv1.GPUUUIDAnnotation]
	if err := shareTicketOnly(&got); err != nil {
		t.Error(err)
	}
	// The UUID is the one the kubelet (its PodResources stand-in) gave the reservation pod.
	var reservations corev1.PodList
	if err := c.Client().List(ctx, &reservations, client.InNamespace(fairwayproc.DefaultNamespace),
		client.MatchingLabels{fairwayv1.ReservationLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range reservations.Items {
		for _, id := range s.Agents.Assigned(r.Spec.NodeName, r.UID) {
			found = found || id == uuid
		}
	}
	if !found {
		t.Errorf("no reservation pod was given GPU %s by the PodResources stand-in", uuid)
	}
	t.Logf("pod %s/%s: %s on %s, GPU %s", got.Namespace, got.Name, got.Annotations[fairwayv1.GPUFractionAnnotation], got.Spec.NodeName, uuid)
}
