// Package cache is the scheduler runtime's view of the cluster: client-go informers whose
// objects are trimmed to what the scheduler reads before they are stored (transform.go), and a
// Queue that coalesces their events per object for the one goroutine that owns the engine's
// snapshot. Informer handlers only enqueue keys; the loop reads each object's latest state from
// the stores when it applies the change, so a pod that changed ten times since the last cycle
// costs one snapshot update.
//
// It also holds the runtime's one addition to what the snapshot sees: volume constraints
// (volumes.go). The engine does not evaluate volumes, so a pending pod that uses a bound
// PersistentVolumeClaim is given to the snapshot with the volume's required node affinity added
// to its own, and one whose claim is missing or unbound is reported unschedulable with the
// reason.
package cache
