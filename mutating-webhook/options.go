package mutatingwebhook

import (
	"context"
	"slices"
	"strings"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// DefaultTakeOverSchedulers are the scheduler names, besides an empty one, that the webhook
// replaces with fairway: the Kubernetes default, and the user-scheduler zero-to-jupyterhub runs
// for notebooks (named "<release>-user-scheduler").
var DefaultTakeOverSchedulers = []string{"default-scheduler", "*-user-scheduler"}

// DefaultMPSPipeDirectory is where CUDA clients look for the MPS control daemon's pipes when
// CUDA_MPS_PIPE_DIRECTORY is unset; the node's pipe directory is mounted there.
const DefaultMPSPipeDirectory = "/tmp/nvidia-mps"

// mpsSharedMemoryPath is where MPS clients and the server share memory: the container's /dev/shm
// must be the server's.
const mpsSharedMemoryPath = "/dev/shm"

// Options say how the defaulter treats pods.
type Options struct {
	// ProtectedNamespaces are never touched, whatever the webhook configuration says: kube-system
	// and fairway's own namespace.
	ProtectedNamespaces []string

	// TakeOverSchedulers are the scheduler names the webhook replaces with fairway; a name
	// starting with '*' matches by suffix. Pods that name any other scheduler are left alone:
	// someone chose that scheduler on purpose. An empty scheduler name and "fairway" itself are
	// always taken.
	TakeOverSchedulers []string

	// MPSVolumes is set when the GPU nodes' agents serve MPS (the chart's agent.mps.enabled):
	// the GPU container of a fractional pod then gets its own MPS pipe directory (at
	// DefaultMPSPipeDirectory, where CUDA clients look) and its own /dev/shm, which its MPS
	// server shares, as CSI ephemeral volumes of the agent's driver (fairwayv1.MPSDriverName).
	MPSVolumes bool

	// AdmissionKey seals every pod the webhook hands to fairway (v1alpha1.AdmittedAnnotation);
	// a scheduler holding the same key places only sealed pods. Nil seals nothing.
	AdmissionKey fairwayv1.AdmissionKey
}

// takesOver reports whether a pod with this scheduler name is fairway's to schedule.
func (o *Options) takesOver(name string) bool {
	if name == "" || name == schedulerName {
		return true
	}
	for _, n := range o.TakeOverSchedulers {
		if suffix, ok := strings.CutPrefix(n, "*"); ok {
			if strings.HasSuffix(name, suffix) {
				return true
			}
		} else if n == name {
			return true
		}
	}
	return false
}

func (o *Options) protected(namespace string) bool {
	return slices.Contains(o.ProtectedNamespaces, namespace)
}

// ClusterState is what the defaulter knows about the cluster. The webhook serves it from informer
// caches, so admission never waits for the API server; tests use a static implementation.
type ClusterState interface {
	// QueuesServing returns, sorted, the names of the queues whose spec.namespaces lists namespace.
	QueuesServing(ctx context.Context, namespace string) ([]string, error)
	// QueueExists reports whether a queue of that name exists.
	QueueExists(ctx context.Context, name string) (bool, error)
	// QueueAdmit is the queue's effective spec.admit (v1alpha1.DefaultAdmitPolicy when unset or
	// when the queue is gone).
	QueueAdmit(ctx context.Context, name string) (fairwayv1.AdmitPolicy, error)
	// QueuePolicies returns the spec.policy of the queue and of each ancestor, the queue first,
	// for fairwayv1.ResolvePolicy; it stops at a parent that does not exist or at a loop.
	QueuePolicies(ctx context.Context, name string) ([]fairwayv1.PolicyLevel, error)
	// LargestGPUMemoryMiB is the memory of the largest GPU any node reports (node label
	// fairway.dev/gpu-memory), 0 when no node reports one.
	LargestGPUMemoryMiB() int64
	// PriorityClass reports whether a PriorityClass of that name exists.
	PriorityClassExists(ctx context.Context, name string) (bool, error)
	// GlobalDefaultPriorityClass names the PriorityClass marked globalDefault, "" when none is.
	GlobalDefaultPriorityClass(ctx context.Context) (string, error)
}
