package volumebinder

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// lookup is a tiny, mutable stand-in for the informer caches.
type lookup struct {
	mu      sync.Mutex
	pods    map[string]*corev1.Pod
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
	nodes   map[string]*corev1.Node
}

func (l *lookup) Pod(ns, n string) *corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods[ns+"/"+n]
}
func (l *lookup) Node(n string) *corev1.Node { l.mu.Lock(); defer l.mu.Unlock(); return l.nodes[n] }
func (l *lookup) Claim(ns, n string) *corev1.PersistentVolumeClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.claims[ns+"/"+n]
}
func (l *lookup) Volume(n string) *corev1.PersistentVolume {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.volumes[n]
}
func (l *lookup) StorageClass(n string) *storagev1.StorageClass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.classes[n]
}
func (l *lookup) VolumesOfClass(class string) []*corev1.PersistentVolume {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*corev1.PersistentVolume
	for _, v := range l.volumes {
		if volumehelpers.GetPersistentVolumeClass(v) == class {
			out = append(out, v)
		}
	}
	return out
}
func (l *lookup) AnyNode(func(*corev1.Node) bool) bool { return true }

// bind makes the PV controller's part: the claim names the volume and is bind-completed.
func (l *lookup) bind(claim, volume string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.claims[claim].DeepCopy()
	c.Spec.VolumeName = volume
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, volumehelpers.AnnBindCompleted, "yes")
	l.claims[claim] = c
	v := l.volumes[volume]
	if v == nil {
		v = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}}
	}
	v = v.DeepCopy()
	v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	l.volumes[volume] = v
}

func podWithClaim(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

func newClaim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

func TestGangWaitsForEveryClaim(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}}}
	local := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-n1"}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: "local", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}},
	}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}}
	l := &lookup{
		pods:    map[string]*corev1.Pod{"ns/a": podWithClaim("a", "dyn"), "ns/b": podWithClaim("b", "static"), "ns/c": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"}}},
		claims:  map[string]*corev1.PersistentVolumeClaim{"ns/dyn": newClaim("dyn", "standard"), "ns/static": newClaim("static", "local")},
		volumes: map[string]*corev1.PersistentVolume{"local-n1": local},
		classes: map[string]*storagev1.StorageClass{
			"standard": {ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "rancher.io/local-path", VolumeBindingMode: &wffc},
			"local":    {ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: volumehelpers.NotSupportedProvisioner, VolumeBindingMode: &wffc},
		},
		nodes: map[string]*corev1.Node{"n1": node},
	}
	cs := fake.NewClientset(local.DeepCopy(), l.claims["ns/dyn"].DeepCopy(), l.claims["ns/static"].DeepCopy())
	var mu sync.Mutex
	var bound []binder.Request
	var failed []cache.Outcome
	waiting := map[string]string{}
	vb := New(cs, l, func(r ...binder.Request) { mu.Lock(); bound = append(bound, r...); mu.Unlock() },
		func(o cache.Outcome) { mu.Lock(); failed = append(failed, o); mu.Unlock() }, Options{Poll: 5 * time.Millisecond,
			Waiting: func(r *binder.Request, note string) { mu.Lock(); waiting[r.Pod.Name] = note; mu.Unlock() }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = vb.Start(ctx) }()

	gang := snapshot.GangKey{Namespace: "ns", Name: "g"}
	req := func(pod string) binder.Request {
		return binder.Request{Binding: engine.Binding{Pod: types.NamespacedName{Namespace: "ns", Name: pod}, Gang: gang, Node: "n1"}, UID: types.UID("uid-" + pod)}
	}
	vb.Submit(req("a"), req("b"), req("c"))
	// fairway binds the static volume and asks for the dynamic one on the node.
	waitFor(t, "the API writes", func() bool {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, "local-n1", metav1.GetOptions{})
		if err != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "static" || pv.Spec.ClaimRef.UID != "uid-static" ||
			pv.Annotations[volumehelpers.AnnBoundByController] != "yes" {
			return false
		}
		c, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "dyn", metav1.GetOptions{})
		return err == nil && c.Annotations[volumehelpers.AnnSelectedNode] == "n1"
	})
	// One claim bound: nothing of the gang is bound yet, not even the pod without claims.
	l.bind("ns/static", "local-n1")
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if len(bound) != 0 || len(failed) != 0 {
		t.Fatalf("bound %v, failed %v before every claim is bound", bound, failed)
	}
	mu.Unlock()
	l.mu.Lock()
	l.claims["ns/dyn"] = l.claims["ns/dyn"].DeepCopy()
	metav1.SetMetaDataAnnotation(&l.claims["ns/dyn"].ObjectMeta, volumehelpers.AnnSelectedNode, "n1")
	l.mu.Unlock()
	l.bind("ns/dyn", "pvc-dyn")
	waitFor(t, "the gang handed to the pod binder", func() bool { mu.Lock(); defer mu.Unlock(); return len(bound) == 3 })
	if len(failed) != 0 {
		t.Errorf("failures: %v", failed)
	}
	// Every pod was told why it waits (an event on the pod); b's static claim may have been
	// bound by then (the test binds it once it sees the API writes).
	for pod, want := range map[string]string{
		"a": "placed on node n1; waiting for PersistentVolumeClaim ns/dyn to be bound",
		"b": "placed on node n1; waiting for ",
		"c": "waiting for the volumes of the other pods of its gang",
	} {
		if !strings.Contains(waiting[pod], want) {
			t.Errorf("pod %s: waiting note %q, want %q", pod, waiting[pod], want)
		}
	}
}

func TestProvisioningGivenUpFailsTheGang(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	l := &lookup{
		pods:    map[string]*corev1.Pod{"ns/a": podWithClaim("a", "dyn")},
		claims:  map[string]*corev1.PersistentVolumeClaim{"ns/dyn": newClaim("dyn", "standard")},
		volumes: map[string]*corev1.PersistentVolume{},
		classes: map[string]*storagev1.StorageClass{"standard": {ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "x", VolumeBindingMode: &wffc}},
		nodes:   map[string]*corev1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}},
	}
	cs := fake.NewClientset(l.claims["ns/dyn"].DeepCopy())
	var mu sync.Mutex
	var failed []cache.Outcome
	vb := New(cs, l, func(r ...binder.Request) { t.Errorf("bound %v", r) },
		func(o cache.Outcome) { mu.Lock(); failed = append(failed, o); mu.Unlock() }, Options{Poll: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = vb.Start(ctx) }()
	vb.Submit(binder.Request{Binding: engine.Binding{Pod: types.NamespacedName{Namespace: "ns", Name: "a"}, Node: "n1"}, UID: "uid-a"})
	// The informer sees the annotation, then the provisioner removes it.
	setSelected := func(node string) {
		l.mu.Lock()
		c := l.claims["ns/dyn"].DeepCopy()
		c.Annotations = map[string]string{}
		if node != "" {
			c.Annotations[volumehelpers.AnnSelectedNode] = node
		}
		l.claims["ns/dyn"] = c
		l.mu.Unlock()
	}
	setSelected("n1")
	time.Sleep(30 * time.Millisecond)
	setSelected("")
	waitFor(t, "the failure reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(failed) == 1 })
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
