// Package runtime is the process around the pure scheduling engine: `fairway scheduler`.
//
// A live cluster goes in through informers (package cache), decisions come out through workers,
// and their outcomes come back to the one goroutine that owns the snapshot:
//
//	informers ──keys──▶ cache.Queue ──▶ loop (owns snapshot, runs engine.Schedule)
//	                         ▲              │ bindings        │ evictions     │ report
//	                         │              ▼                 ▼               ▼
//	                         └──failures── binder          evictor        status writer, metrics
//	                                        │ fractional
//	                                        ▼
//	                                     gpushare (reservation pods, GPU ConfigMaps)
//
// Every long-lived part is a controller-runtime manager.Runnable. The informers run on every
// replica (NeedLeaderElection false) so a newly elected leader starts from warm caches; the loop,
// the binder, the evictor, the reservation manager, the PodGroup controller and the status
// writer run on the leader only. The leader builds its snapshot from the caches before its first
// cycle; a pod is bound at most once because the API server accepts one binding per pod (the
// binding carries the pod's UID) and the binder never has two bindings of a pod in flight.
//
// See README.md for the flags, the metrics, the fractional GPU flow and the HA behaviour.
package runtime
