package runtime

import (
	corev1 "k8s.io/api/core/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
)

// applyVolumeChange re-applies the pending pods whose placement a volume or a storage class may
// change: the claim a volume names, and, for a volume free to bind or a class, the unbound
// claims of its class (a new static volume opens its nodes to them; a class decides whether
// they wait, provision, or can never be satisfied).
func (l *loop) applyVolumeChange(k cache.Key) {
	inf := l.rt.inf
	class := k.Name
	if k.Kind == cache.KindVolume {
		pv := inf.Volume(k.Name)
		if pv == nil {
			return
		}
		if pv.Spec.ClaimRef != nil {
			l.applyClaimPods(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
			return
		}
		class = volumehelpers.GetPersistentVolumeClass(pv)
	}
	for _, c := range inf.ClaimsOfClass(class) {
		if c.Spec.VolumeName == "" {
			l.applyClaimPods(c.Namespace, c.Name)
		}
	}
}

// applyClaimPods re-applies the pending pods that use a claim.
func (l *loop) applyClaimPods(namespace, name string) {
	for _, p := range l.rt.inf.PodsByIndex(cache.IndexClaim, namespace+"/"+name) {
		if p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
			l.apply(cache.Key{Kind: cache.KindPod, Namespace: p.Namespace, Name: p.Name})
		}
	}
}
