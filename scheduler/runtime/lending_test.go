package runtime

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A loan found running (fairway.dev/loan) on an idle notebook's GPU goes back when the notebook
// wakes: the GPUIdle flip reaches the loop through the informer (kept by the transform, relevant
// to the change filter), the loan is evicted with the loan-return grace period, and the return
// is timed from the agent's observation (fairway.dev/gpu-idle-observed, finer than the
// condition's lastTransitionTime).
func TestLoanReturnedWhenTheNotebookWakes(t *testing.T) {
	idleAt := time.Now().Add(-time.Hour)
	nb := testutil.MakePod("research", "nb").Queue("research").Fraction("0.5").Priority(100).Node("n1").GPUIndex(0).
		Annotation(v1alpha1.IdleGPUMemoryAnnotation, "2048").Annotation(v1alpha1.GPUIdleObservedAnnotation, v1alpha1.FormatGPUIdleObserved(idleAt)).Obj()
	nb.UID, nb.Spec.SchedulerName = "nb-uid", v1alpha1.SchedulerName
	nb.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(idleAt.Truncate(time.Second)), Message: "idle"}}
	loan := testutil.MakePod("training", "train").Queue("training").Fraction("0.25").Priority(50).Node("n1").GPUIndex(0).
		Annotation(v1alpha1.LoanAnnotation, "true").Obj()
	loan.UID, loan.Spec.SchedulerName = "train-uid", v1alpha1.SchedulerName
	cs := fake.NewClientset(testutil.MakeNode("n1").GPUs(1, "H100").Inventory(81920).Obj(), nb, loan)
	// The loan goes back through the Eviction API; the fake has no eviction subresource, so the
	// reactor plays the API server: it records the grace and deletes the pod.
	deletes := make(chan int64, 4)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		c, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := c.GetObject().(*policyv1.Eviction)
		if ev.Name == "train" {
			deletes <- ptr.Deref(ev.DeleteOptions.GracePeriodSeconds, -1)
		}
		return true, nil, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
	research := testutil.MakeQueue("research").GPU("1", 1, "").Obj()
	research.Spec.IdleLending = &v1alpha1.IdleLending{Lend: ptr.To(true)}
	rt := startRuntime(t, cs, research, testutil.MakeQueue("training").Obj())
	eventually(t, "the snapshot built", func() bool { return rt.loop.built.Load() })
	time.Sleep(200 * time.Millisecond) // a few cycles: the loan stays while the notebook idles
	select {
	case <-deletes:
		t.Fatal("the loan was evicted while the notebook idles")
	default:
	}

	// As the gpu-agent writes it: the observation time on the pod, then the condition.
	wokeAt := time.Now()
	awake := nb.DeepCopy()
	awake.Annotations[v1alpha1.GPUIdleObservedAnnotation] = v1alpha1.FormatGPUIdleObserved(wokeAt)
	awake, err := cs.CoreV1().Pods("research").Update(context.Background(), awake, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	awake.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.GPUIdleCondition, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(wokeAt.Truncate(time.Second)), Message: "GPU utilization 80% above 5%"}}
	if _, err := cs.CoreV1().Pods("research").UpdateStatus(context.Background(), awake, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case grace := <-deletes:
		if grace != 5 {
			t.Errorf("loan evicted with a grace period of %ds, want the default 5s", grace)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loan was not evicted after the notebook woke")
	}
	eventually(t, "the return timed", func() bool {
		var m dto.Metric
		_ = rt.metrics.LoanReturn.Write(&m)
		return m.GetHistogram().GetSampleCount() == 1
	})
	var m dto.Metric
	_ = rt.metrics.LoanReturn.Write(&m)
	if s := m.GetHistogram().GetSampleSum(); s <= 0 || s > 5 {
		t.Errorf("activity-to-return %vs, want between 0 and 5s", s)
	}
	if _, err := cs.CoreV1().Pods("training").Get(context.Background(), "train", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the loan is still there: %v", err)
	}
}
