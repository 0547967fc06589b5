package cache

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

type volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
}

func (v volumes) Claim(ns, name string) *corev1.PersistentVolumeClaim { return v.claims[ns+"/"+name] }
func (v volumes) Volume(name string) *corev1.PersistentVolume         { return v.volumes[name] }

func withClaim(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + claim, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return p
}

func zoneTerm(key string, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func TestWithVolumeConstraints(t *testing.T) {
	vl := volumes{
		claims: map[string]*corev1.PersistentVolumeClaim{
			"a/bound":     {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
			"a/unbound":   {},
			"a/p-scratch": {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-2"}},
		},
		volumes: map[string]*corev1.PersistentVolume{
			"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
				Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zoneTerm("zone", "z1")}}}}},
			"pv-2": {ObjectMeta: metav1.ObjectMeta{Name: "pv-2"}},
		},
	}
	plain := testutil.MakePod("a", "p").Queue("a").Obj()
	if got := WithVolumeConstraints(plain, vl); got != plain {
		t.Error("a pod without claims must be passed through")
	}
	for name, tc := range map[string]struct {
		claim   string
		problem string
	}{
		"missing claim": {"nope", "PersistentVolumeClaim a/nope does not exist"},
		"unbound claim": {"unbound", "is not bound to a volume yet"},
	} {
		t.Run(name, func(t *testing.T) {
			got := WithVolumeConstraints(withClaim(testutil.MakePod("a", "p").Queue("a").Obj(), tc.claim), vl)
			if msg := got.Annotations[snapshot.SchedulingProblemAnnotation]; !strings.Contains(msg, tc.problem) {
				t.Errorf("problem %q, want %q", msg, tc.problem)
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
	// A generic ephemeral volume's claim is <pod>-<volume>; a volume without affinity adds none.
	e := testutil.MakePod("a", "p").Queue("a").Obj()
	e.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	if got := WithVolumeConstraints(e, vl); got != e {
		t.Errorf("ephemeral volume on a volume without affinity: %+v", got.Spec.Affinity)
	}
	// Bound pods are where they are.
	bound := withClaim(testutil.MakePod("a", "p").Queue("a").Node("n1").Obj(), "nope")
	if got := WithVolumeConstraints(bound, vl); got != bound {
		t.Error("a bound pod must be passed through")
	}
}
