package runtime

import (
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
)

// applyDRA brings one DRA object of the snapshot up to date (docs/dra.md). A claim's pods are
// applied again: what they ask for, and which GPUs they hold, follow their claims.
func (l *loop) applyDRA(k cache.Key) {
	inf := l.rt.inf
	switch k.Kind {
	case cache.KindDeviceClass:
		if c := inf.DeviceClass(k.Name); c != nil {
			l.snap.UpsertDeviceClass(c)
		} else {
			l.snap.DeleteDeviceClass(k.Name)
		}
	case cache.KindResourceSlice:
		if rs := inf.ResourceSlice(k.Name); rs != nil {
			l.snap.UpsertResourceSlice(rs)
		} else {
			l.snap.DeleteResourceSlice(k.Name)
		}
	case cache.KindResourceClaim:
		if c := inf.ResourceClaim(k.Namespace, k.Name); c != nil {
			l.snap.UpsertResourceClaim(c)
		} else {
			l.snap.DeleteResourceClaim(k.NamespacedName())
		}
		for _, p := range inf.PodsByIndex(cache.IndexResourceClaim, k.Namespace+"/"+k.Name) {
			l.apply(cache.Key{Kind: cache.KindPod, Namespace: p.Namespace, Name: p.Name})
		}
	}
}
