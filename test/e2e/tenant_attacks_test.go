//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
)

// checkTenantAttacks tries, as a tenant with the `edit` role in one namespace (user alice,
// impersonated), to write the keys fairway trusts, on the chart's RBAC and admission policies:
// each attempt must be refused with a message naming what it tried, and afterwards the victim
// pod (a bound half-GPU pod of alice's own namespace), its GPU ConfigMap and the queues are as
// they were. victim is that pod.
func checkTenantAttacks(t *testing.T, c *cluster.Cluster, victim client.ObjectKey) {
	ctx := t.Context()
	ns := victim.Namespace
	const user = "alice"
	mustCreate(t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	alice, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	aliceClient, err := client.New(cfg, client.Options{Scheme: c.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var before corev1.Pod
	if err := c.Client().Get(ctx, victim, &before); err != nil {
		t.Fatal(err)
	}
	cmName := before.Annotations[fairwayv1.GPUConfigMapAnnotation]
	var cmBefore corev1.ConfigMap
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, &cmBefore); err != nil {
		t.Fatal(err)
	}
	// The victim's queue shows the pod's half GPU before the attacks.
	var queuesBefore map[string]string
	eventually(t, 30*time.Second, "queue "+ns+"'s status to show the victim's half GPU", func(ctx context.Context) (bool, error) {
		queuesBefore = queueUsage(t, c)
		return queuesBefore[ns] == "500m", fmt.Errorf("allocated %v", queuesBefore)
	})

	pods := alice.CoreV1().Pods(ns)
	patchPod := func(patch string) error {
		_, err := pods.Patch(ctx, victim.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	annotation := func(k, v string) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
	}
	podWith := func(name string, labels, annotations map[string]string, gpus int64) func() error {
		return func() error {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{fairwayv1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
			}
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	cms := alice.CoreV1().ConfigMaps(ns)
	type attack struct {
		what string
		do   func() error
		// refused is a part of the refusal's message; forbidden means RBAC's refusal.
		refused string
	}
	const forbidden = "is forbidden: User \"alice\" cannot"
	attacks := []attack{
		{"move her half-GPU pod's share to another GPU (gpu-index patched)", func() error {
			return patchPod(annotation(fairwayv1.GPUIndexAnnotation, "7"))
		}, "changing annotation fairway.dev/gpu-index is refused"},
		{"change the GPU UUID her pod's share is on", func() error {
			return patchPod(annotation(fairwayv1.GPUUUIDAnnotation, "GPU-forged"))
		}, "annotation fairway.dev/gpu-uuid"},
		{"mark her pod a loan, out of her queue's usage", func() error {
			return patchPod(annotation(fairwayv1.LoanAnnotation, "true"))
		}, "annotation fairway.dev/loan"},
		{"point her pod at another GPU ConfigMap", func() error {
			return patchPod(annotation(fairwayv1.GPUConfigMapAnnotation, "mine"))
		}, "annotation fairway.dev/gpu-configmap"},
		{"take her pod out of its gang (pod-group patched)", func() error {
			return patchPod(annotation(fairwayv1.PodGroupAnnotation, "elsewhere"))
		}, "fairway.dev/pod-group"},
		{"take fairway's managed label off her pod", func() error {
			return patchPod(`{"metadata":{"labels":{"fairway.dev/managed":null}}}`)
		}, "fairway.dev/managed"},
		{"move her pod to team-a's queue", func() error {
			return patchPod(`{"metadata":{"labels":{"fairway.dev/queue":"team-a"}}}`)
		}, "fairway.dev/queue"},
		{"create an 8-GPU pod labelled as a reservation", podWith("forged-reservation",
			map[string]string{fairwayv1.ReservationLabel: "true"}, nil, 8), "setting label fairway.dev/reservation is refused"},
		{"create a pod that names its GPU (gpu-index at creation)", podWith("forged-index",
			nil, map[string]string{fairwayv1.GPUIndexAnnotation: "0", fairwayv1.GPUFractionAnnotation: "0.5"}, 0), "annotation fairway.dev/gpu-index"},
		{"create a pod already on loan", podWith("forged-loan",
			nil, map[string]string{fairwayv1.LoanAnnotation: "true"}, 1), "annotation fairway.dev/loan"},
		{"create a pod in fairway's namespace", func() error {
			_, err := alice.CoreV1().Pods(chart.Namespace).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{fairwayv1.ReservationLabel: "true"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{})
			return err
		}, forbidden},
		{"make her GPU ConfigMap show every GPU", func() error {
			cm := cmBefore.DeepCopy()
			cm.Data = map[string]string{fairwayv1.GPUConfigMapVisibleDevicesKey: "all"}
			_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}, "is labelled app.kubernetes.io/managed-by=fairway"},
		{"delete her GPU ConfigMap", func() error {
			return cms.Delete(ctx, cmName, metav1.DeleteOptions{})
		}, "is labelled app.kubernetes.io/managed-by=fairway"},
		{"create a GPU ConfigMap of her own", func() error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fairway-gpu-forged",
				Labels: map[string]string{fairwayv1.ManagedByLabel: fairwayv1.ManagedByValue}},
				Data: map[string]string{fairwayv1.GPUConfigMapVisibleDevicesKey: "all"}}, metav1.CreateOptions{})
			return err
		}, "is labelled app.kubernetes.io/managed-by=fairway"},
		{"write a PodGroup naming team-a's queue", func() error {
			return aliceClient.Create(ctx, &fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns},
				Spec: fairwayv1.PodGroupSpec{Queue: "team-a", MinMember: 1}})
		}, forbidden},
		{"raise her queue's guarantee", func() error {
			var q fairwayv1.Queue
			if err := aliceClient.Get(ctx, client.ObjectKey{Name: "team-c"}, &q); err != nil {
				return err
			}
			return aliceClient.Update(ctx, &q)
		}, forbidden},
	}
	for _, a := range attacks {
		err := a.do()
		switch {
		case err == nil:
			t.Errorf("tenant attack %q: allowed", a.what)
		case !strings.Contains(err.Error(), a.refused):
			t.Errorf("tenant attack %q: refused with %q, want a message containing %q", a.what, err, a.refused)
		case a.refused == forbidden && !apierrors.IsForbidden(err):
			t.Errorf("tenant attack %q: %v, want Forbidden", a.what, err)
		default:
			t.Logf("tenant attack %q: refused: %s", a.what, err)
		}
	}

	// Nothing changed: the pod's keys, its GPU ConfigMap, every queue's usage.
	var after corev1.Pod
	if err := c.Client().Get(ctx, victim, &after); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) || after.Spec.NodeName != before.Spec.NodeName {
		t.Errorf("the victim pod changed: labels %v -> %v, annotations %v -> %v", before.Labels, after.Labels, before.Annotations, after.Annotations)
	}
	var cmAfter corev1.ConfigMap
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, &cmAfter); err != nil {
		t.Errorf("the GPU ConfigMap: %v", err)
	} else if !maps.Equal(cmBefore.Data, cmAfter.Data) {
		t.Errorf("the GPU ConfigMap changed: %v -> %v", cmBefore.Data, cmAfter.Data)
	}
	// Two scheduler cycles later, still nothing.
	time.Sleep(3 * time.Second)
	if after := queueUsage(t, c); !maps.Equal(queuesBefore, after) {
		t.Errorf("queues' usage changed: %v -> %v", queuesBefore, after)
	}
	for _, name := range []string{"forged-reservation", "forged-index", "forged-loan"} {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s/%s: %v, want not found", ns, name, err)
		}
	}
}

// queueUsage is each Queue's allocated GPUs, as its status says.
func queueUsage(t *testing.T, c *cluster.Cluster) map[string]string {
	var list fairwayv1.QueueList
	if err := c.Client().List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, q := range list.Items {
		a := q.Status.Allocated[corev1.ResourceName("gpu")]
		out[q.Name] = a.String()
	}
	return out
}
