package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// richPod is a pod with everything the snapshot reads and a lot it does not.
func richPod() *corev1.Pod {
	p := testutil.MakePod("team-a", "train-0").Queue("team-a").PodGroup("train").MinMember(4).SubGroup("workers").
		Fraction("0.5").Priority(50).NodeSelector("pool", "h100").Toleration("gpu", "yes", corev1.TaintEffectNoSchedule).
		TopologyRequired("fairway.dev/rack").HostPort(8080).Gate("example.com/gate").
		Annotation("kubectl.kubernetes.io/last-applied-configuration", string(make([]byte, 2000))).Obj()
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: metav1.NewFieldsV1(strings.Repeat("f", 3000))}}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "j1", Controller: ptr.To(true)}}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600) // its evictions' grace period
	c := &p.Spec.Containers[0]
	c.Image = "ghcr.io/example/trainer:v1"
	c.Command = []string{"python", "train.py", "--epochs", "100"}
	c.Env = []corev1.EnvVar{{Name: "A", Value: string(make([]byte, 500))}}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "waiting"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "ghcr.io/example/trainer:v1"}}
	return p
}

func TestTrimPodKeepsWhatTheSnapshotReads(t *testing.T) {
	for name, p := range map[string]*corev1.Pod{
		"pending": richPod(),
		"bound":   testutil.MakePod("a", "b").Queue("a").GPU(2).Node("n1").GPUIndex(3, 4).Started(testutil.Epoch.Add(time.Hour)).Obj(),
		"reservation": testutil.MakePod("fairway-system", "fairway-gpu-n1-2").Reservation("n1", 2, 5).
			Annotation(v1alpha1.GPUUUIDAnnotation, "GPU-x").Obj(),
		"terminating":   testutil.MakePod("a", "t").Queue("a").GPU(1).Node("n1").Terminating().Obj(),
		"idle notebook": idleNotebook(),
	} {
		t.Run(name, func(t *testing.T) {
			trimmed := TrimPod(p.DeepCopy())
			if diff := cmp.Diff(snapshot.PodInfoFromPod(p), snapshot.PodInfoFromPod(trimmed)); diff != "" {
				t.Errorf("PodInfo changed by trimming (-orig +trimmed):\n%s", diff)
			}
			if len(trimmed.ManagedFields) != 0 || trimmed.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
				t.Error("managed fields or foreign annotations kept")
			}
		})
	}
	p := richPod()
	trimmed := TrimPod(p.DeepCopy())
	if c := trimmed.Spec.Containers[0]; c.Image != "" || len(c.Env) != 0 || len(c.Command) != 0 {
		t.Errorf("container kept image/env/command: %+v", c)
	}
	if got := ClaimNames(trimmed); len(got) != 1 || got[0] != "data" {
		t.Errorf("claims after trimming: %v", got)
	}
	if metav1.GetControllerOf(trimmed) == nil || len(trimmed.Status.Conditions) != 1 {
		t.Errorf("owner or PodScheduled condition lost: %v %v", trimmed.OwnerReferences, trimmed.Status.Conditions)
	}
	if before, after := p.Size(), trimmed.Size(); after*4 > before {
		t.Errorf("trimmed pod is %d bytes of %d: want at most a quarter", after, before)
	} else {
		t.Logf("pod %d bytes, trimmed %d", before, after)
	}
}

// idleNotebook is a notebook the gpu-agent reports idle.
func idleNotebook() *corev1.Pod {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678000, time.UTC)
	p := testutil.MakePod("a", "nb").Queue("a").Fraction("0.5").Priority(100).Node("n1").GPUIndex(0).
		Annotation(v1alpha1.IdleGPUMemoryAnnotation, "2048").Annotation(v1alpha1.GPUIdleObservedAnnotation, v1alpha1.FormatGPUIdleObserved(at)).Obj()
	p.Status.Conditions = []corev1.PodCondition{{Type: v1alpha1.GPUIdleCondition, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(at.Truncate(time.Second)), Message: "idle"}}
	return p
}

// A notebook waking (the gpu-agent flips GPUIdle) must wake the loop: its GPU's loans go back.
func TestGPUIdleChangeIsRelevant(t *testing.T) {
	idle := idleNotebook()
	awake := idle.DeepCopy()
	awake.Status.Conditions[0].Status = corev1.ConditionFalse
	if !podChangeRelevant(idle, awake) || !podChangeRelevant(awake, idle) {
		t.Error("a GPUIdle flip is not relevant")
	}
	again := idle.DeepCopy()
	again.Status.Conditions = append(again.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if podChangeRelevant(idle, again) {
		t.Error("a change of another condition is relevant")
	}
	if !podChangeRelevant(idle, TrimPod(awake.DeepCopy())) {
		t.Error("trimming drops the GPUIdle condition")
	}
	// Re-asserted within the same second: only the observation time moves.
	reasserted := idle.DeepCopy()
	reasserted.Annotations[v1alpha1.GPUIdleObservedAnnotation] = v1alpha1.FormatGPUIdleObserved(time.Date(2026, 1, 2, 3, 4, 5, 900000, time.UTC))
	if !podChangeRelevant(idle, reasserted) {
		t.Error("a new GPUIdle observation time is not relevant")
	}
	if got := v1alpha1.GPUIdleObserved(TrimPod(idle.DeepCopy())); !got.Equal(time.Date(2026, 1, 2, 3, 4, 5, 678000, time.UTC)) {
		t.Errorf("trimming loses the GPUIdle observation time: %s", got)
	}
}

func TestTrimForeignPodKeepsItsFootprint(t *testing.T) {
	p := richPod()
	p.Spec.NodeName = "n1"
	p.Spec.SchedulerName = "default-scheduler"
	got, want := snapshot.PodInfoFromPod(TrimForeignPod(p.DeepCopy())), snapshot.PodInfoFromPod(p)
	if got.Req.MilliCPU != want.Req.MilliCPU || got.Req.Memory != want.Req.Memory || got.NodeName != "n1" ||
		got.Lifecycle != snapshot.LifecycleBound || len(got.Req.HostPorts) != 1 {
		t.Errorf("foreign pod: got %+v, want its requests %+v on n1", got, want)
	}
}

func TestTrimNodeKeepsWhatTheSnapshotReads(t *testing.T) {
	n := testutil.MakeNode("n1").GPUs(8, "H100").Inventory(81920).Taint("k", "v", corev1.TaintEffectNoSchedule).Obj()
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}, SizeBytes: 1}}
	n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	want, _ := snapshot.NodeInfoFromNode(n)
	got, _ := snapshot.NodeInfoFromNode(TrimNode(n.DeepCopy()))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeInfo changed by trimming (-orig +trimmed):\n%s", diff)
	}
}

func TestTransformUnwrapsTombstones(t *testing.T) {
	f := transform(TrimPod)
	out, err := f(cache.DeletedFinalStateUnknown{Key: "a/b", Obj: richPod()})
	if err != nil {
		t.Fatal(err)
	}
	if p := out.(cache.DeletedFinalStateUnknown).Obj.(*corev1.Pod); len(p.ManagedFields) != 0 {
		t.Error("tombstone's pod not trimmed")
	}
}

// The kubelet's reason for failing a pod survives trimming (a rejection at admission backs its
// node off); a running pod keeps no reason or message.
func TestTrimPodKeepsWhyTheKubeletFailedIt(t *testing.T) {
	p := richPod()
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason, p.Status.Message = "OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu"
	if got := TrimPod(p.DeepCopy()); got.Status.Reason != p.Status.Reason || got.Status.Message != p.Status.Message {
		t.Errorf("failed pod trimmed to reason %q, message %q", got.Status.Reason, got.Status.Message)
	}
	p.Status.Phase = corev1.PodRunning
	if got := TrimPod(p.DeepCopy()); got.Status.Reason != "" || got.Status.Message != "" {
		t.Errorf("running pod kept reason %q, message %q", got.Status.Reason, got.Status.Message)
	}
}
