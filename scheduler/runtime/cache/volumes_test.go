package cache

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

type volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
	nodes   []*corev1.Node
}

func (v volumes) Claim(ns, name string) *corev1.PersistentVolumeClaim { return v.claims[ns+"/"+name] }
func (v volumes) Volume(name string) *corev1.PersistentVolume         { return v.volumes[name] }
func (v volumes) StorageClass(name string) *storagev1.StorageClass    { return v.classes[name] }
func (v volumes) VolumesOfClass(class string) []*corev1.PersistentVolume {
	var out []*corev1.PersistentVolume
	for _, pv := range v.volumes {
		if volumehelpers.GetPersistentVolumeClass(pv) == class {
			out = append(out, pv)
		}
	}
	return out
}
func (v volumes) AnyNode(match func(*corev1.Node) bool) bool {
	for _, n := range v.nodes {
		if match(n) {
			return true
		}
	}
	return false
}

func withClaim(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + claim, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return p
}

func zoneTerm(key string, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func claim(class string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func localPV(name, class, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			zoneTerm(corev1.LabelHostname, node)}}},
	}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}}
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode, topo ...corev1.TopologySelectorTerm) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode, AllowedTopologies: topo}
}

func TestWithVolumeConstraints(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	zoneA := corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"a"}}}}
	zoneX := corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"x"}}}}
	vl := volumes{
		claims: map[string]*corev1.PersistentVolumeClaim{
			"a/bound":       {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
			"a/noclass":     claim("", nil),
			"a/p-scratch":   {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p-scratch"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-2"}},
			"a/immediate":   claim("fast", nil),
			"a/noclassobj":  claim("gone", nil),
			"a/dynamic":     claim("standard", nil),
			"a/selected":    claim("standard", map[string]string{volumehelpers.AnnSelectedNode: "n7"}),
			"a/local":       claim("local", nil),
			"a/local-big":   {Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Ti")}}}},
			"a/zonal":       claim("zonal", nil),
			"a/nowhere":     claim("nowhere", nil),
			"a/localorprov": claim("mixed", nil),
		},
		volumes: map[string]*corev1.PersistentVolume{
			"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
				Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zoneTerm("zone", "z1")}}}}},
			"pv-2":     {ObjectMeta: metav1.ObjectMeta{Name: "pv-2"}},
			"local-n1": localPV("local-n1", "local", "n1"),
			"local-n2": localPV("local-n2", "local", "n2"),
			"mixed-n3": localPV("mixed-n3", "mixed", "n3"),
		},
		classes: map[string]*storagev1.StorageClass{
			"fast":     class("fast", "ebs.csi.aws.com", storagev1.VolumeBindingImmediate),
			"standard": class("standard", "rancher.io/local-path", wffc),
			"local":    class("local", volumehelpers.NotSupportedProvisioner, wffc),
			"zonal":    class("zonal", "pd.csi.storage.gke.io", wffc, zoneA),
			"nowhere":  class("nowhere", "pd.csi.storage.gke.io", wffc, zoneX),
			"mixed":    class("mixed", "pd.csi.storage.gke.io", wffc, zoneA),
		},
		nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}},
	}
	plain := testutil.MakePod("a", "p").Queue("a").Obj()
	if got := WithVolumeConstraints(plain, vl); got != plain {
		t.Error("a pod without claims must be passed through")
	}
	// Problems name the claim and say why.
	for name, tc := range map[string]struct {
		claim   string
		problem string
	}{
		"missing claim":        {"nope", "PersistentVolumeClaim a/nope does not exist"},
		"no class, no volume":  {"noclass", "a/noclass has no storage class and no PersistentVolume without a class matches it"},
		"immediate, unbound":   {"immediate", "a/immediate (StorageClass fast, volumeBindingMode Immediate) is not bound yet"},
		"missing class":        {"noclassobj", `StorageClass "gone" of PersistentVolumeClaim a/noclassobj does not exist`},
		"too big for every PV": {"local-big", "a/local-big: no PersistentVolume of StorageClass local matches it"},
		"topology of no node":  {"nowhere", "a/nowhere: no node is in the allowedTopologies of StorageClass nowhere (zone in [x])"},
	} {
		t.Run(name, func(t *testing.T) {
			got := WithVolumeConstraints(withClaim(testutil.MakePod("a", "p").Queue("a").Obj(), tc.claim), vl)
			if msg := got.Annotations[snapshot.VolumeProblemAnnotation]; !strings.Contains(msg, tc.problem) {
				t.Errorf("problem %q, want %q", msg, tc.problem)
			}
		})
	}
	affinity := func(p *corev1.Pod) []corev1.NodeSelectorTerm {
		if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			return nil
		}
		return p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	for name, tc := range map[string]struct {
		claim string
		want  []corev1.NodeSelectorTerm
	}{
		// Dynamic provisioning without topologies: anywhere; the pod is passed through.
		"dynamic":            {"dynamic", nil},
		"selected node pins": {"selected", []corev1.NodeSelectorTerm{NodeNameTerm("n7")}},
		"static local PVs":   {"local", []corev1.NodeSelectorTerm{zoneTerm(corev1.LabelHostname, "n1"), zoneTerm(corev1.LabelHostname, "n2")}},
		"allowedTopologies":  {"zonal", []corev1.NodeSelectorTerm{zoneTerm("zone", "a")}},
		"static or topology": {"localorprov", []corev1.NodeSelectorTerm{zoneTerm(corev1.LabelHostname, "n3"), zoneTerm("zone", "a")}},
	} {
		t.Run(name, func(t *testing.T) {
			got := WithVolumeConstraints(withClaim(testutil.MakePod("a", "p").Queue("a").Obj(), tc.claim), vl)
			if msg := got.Annotations[snapshot.VolumeProblemAnnotation]; msg != "" {
				t.Fatalf("unexpected problem %q", msg)
			}
			terms := affinity(got)
			// Static volumes come from a map: compare as a set.
			if len(terms) == 2 && len(tc.want) == 2 && cmp.Equal(terms[0], tc.want[1]) {
				terms[0], terms[1] = terms[1], terms[0]
			}
			if diff := cmp.Diff(tc.want, terms); diff != "" {
				t.Errorf("terms (-want +got):\n%s", diff)
			}
		})
	}
	// A bound volume's affinity is ANDed with the pod's own (two terms: OR).
	p := withClaim(testutil.MakePod("a", "p").Queue("a").Obj(), "bound")
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{zoneTerm("pool", "a"), zoneTerm("pool", "b")}}}}
	got := WithVolumeConstraints(p, vl)
	terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorTerm{
		{MatchExpressions: append(zoneTerm("pool", "a").MatchExpressions, zoneTerm("zone", "z1").MatchExpressions...)},
		{MatchExpressions: append(zoneTerm("pool", "b").MatchExpressions, zoneTerm("zone", "z1").MatchExpressions...)},
	}
	if diff := cmp.Diff(want, terms); diff != "" {
		t.Errorf("terms (-want +got):\n%s", diff)
	}
	if len(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 2 || p == got {
		t.Error("the cached pod must not be modified")
	}
	// A generic ephemeral volume's claim is <pod>-<volume>, made for the pod (its controller
	// owner); a volume without affinity adds none.
	e := testutil.MakePod("a", "p").Queue("a").Obj()
	e.UID = "uid-p"
	e.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	if got := WithVolumeConstraints(e, vl); !strings.Contains(got.Annotations[snapshot.VolumeProblemAnnotation], "ephemeral volume scratch: PVC a/p-scratch was not created for pod a/p") {
		t.Errorf("a claim of the ephemeral volume's name not made for the pod: problem %q", got.Annotations[snapshot.VolumeProblemAnnotation])
	}
	vl.claims["a/p-scratch"].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p", Controller: ptr.To(true)}}
	if got := WithVolumeConstraints(e, vl); got != e {
		t.Errorf("ephemeral volume on a volume without affinity: %+v %v", got.Spec.Affinity, got.Annotations)
	}
	// Bound pods are where they are.
	bound := withClaim(testutil.MakePod("a", "p").Queue("a").Node("n1").Obj(), "nope")
	if got := WithVolumeConstraints(bound, vl); got != bound {
		t.Error("a bound pod must be passed through")
	}
}
