package cluster

import (
	"time"

	"github.com/go-logr/logr"
)

// Config says what cluster Start brings up. The zero value is a control plane with no nodes, no
// scheduler, and fairway's CRDs applied.
type Config struct {
	// NodePools are the fake nodes created at start; Start returns once they are all Ready and
	// schedulable (the node.kubernetes.io/not-ready taint removed).
	NodePools []NodePool

	// KubeScheduler also starts the real kube-scheduler, so pods with the default scheduler name
	// get bound. Off by default: fairway's own scheduler binds its pods.
	KubeScheduler bool

	// LocalPathProvisioner also starts rancher's local-path-provisioner with LocalPathClass, a
	// WaitForFirstConsumer default StorageClass (StartLocalPathProvisioner), so claims without
	// a class are provisioned on the node their pod is placed on.
	LocalPathProvisioner bool
	// LocalPathHelperImage is the image of the provisioner's helper pods; "busybox" (never
	// pulled on kwok nodes) when empty. Real nodes (test/nodes) need their preloaded one.
	LocalPathHelperImage string

	// CRDDirs are directories of CRD manifests applied after start, and waited for until
	// Established. Nil means fairway's own, <repo root>/charts/fairway/crds; use SkipCRDs for none.
	CRDDirs []string
	// SkipCRDs applies no CRDs at start.
	SkipCRDs bool

	// BinDir holds the binaries; BinDir() (FAIRWAY_BIN or <repo root>/bin) when empty.
	BinDir string
	// WorkDir holds certificates, kubeconfig, etcd data and logs. A new temporary directory,
	// removed on Stop, when empty; a given directory is kept.
	WorkDir string

	// KwokMetrics has kwok play the kubelets' resource metrics endpoint too: for each fake node,
	// KubeletResourceMetricsPath on KwokServerURL serves what a kubelet's /metrics/resource does
	// (pod and container CPU and memory use), with usage from the pods' annotations
	// kwok.x-k8s.io/usage-cpu and kwok.x-k8s.io/usage-memory, or else half their requests
	// (test/cluster/kwokmetrics). Off by default: only tests that scrape usage need kwok's server.
	KwokMetrics bool

	// KwokPodParallelism is how many pod stages kwok plays at once for all its nodes (its
	// podPlayStageParallelism); kwok's default, 4, when 0. Each real node has a kubelet of its
	// own, so hundreds of nodes report their pods' phases in parallel.
	KwokPodParallelism uint

	// Logger receives progress and component events; discarded when unset.
	Logger logr.Logger

	// Extra flags for the components, appended after the defaults (a repeated flag wins).
	APIServerFlags, ControllerManagerFlags, KwokFlags, SchedulerFlags []string

	// StartTimeout bounds Start, from the first process to Ready nodes; 2 minutes when zero.
	StartTimeout time.Duration
}

// Network ranges of the cluster. They are never routed: kwok only writes pod IPs into status.
const (
	ServiceCIDR = "10.96.0.0/16"
	PodCIDR     = "10.64.0.0/12"
)
