package engine

import (
	"time"

	"github.com/go-logr/logr"
)

// Placement is how nodes are chosen for pods.
type Placement string

const (
	// BinPack puts a pod on the fullest node that fits, keeping whole nodes free for large gangs;
	// where pods ask for shares of GPUs, on the node where it fragments GPUs least (fragscore.go):
	// a GPU left partly used, or without the CPU to feed it, is worth only what the requests the
	// cluster sees can still use of it.
	BinPack Placement = "binpack"
	// Spread puts a pod on the emptiest node that fits.
	Spread Placement = "spread"
	// FirstFit puts a pod on the first node, in the snapshot's node order, that fits (on it, the
	// GPUs are chosen as everywhere: the fullest shared GPU with room for a share; the what-ifs
	// of evictions still pack). It is the baseline that replays (fairway sim) compare placement
	// against, not a policy to run.
	FirstFit Placement = "firstfit"
)

// Options configure the engine. The zero value is usable: every field has a documented default.
type Options struct {
	// Placement is BinPack (default), Spread or FirstFit.
	Placement Placement

	// StarvationThreshold is how long a gang may wait before the capacity it needs is held for
	// it, so that smaller jobs that backfill around it cannot starve it forever. Default 10m;
	// negative disables holds for waiting gangs.
	StarvationThreshold time.Duration

	// StaleGangGracePeriod is how long a gang may run with fewer than its minimum of pods
	// before the rest of it is evicted. Default 60s.
	StaleGangGracePeriod time.Duration

	// EvictionGracePeriod is the grace period of an eviction of a pod whose spec sets no
	// terminationGracePeriodSeconds (the API server defaults it to 30s, so in a cluster only
	// hand-made snapshots lack it); every other pod gets its own, capped by its queue's
	// maxEvictionGracePeriod. Default 30s.
	EvictionGracePeriod time.Duration

	// LoanReturnGracePeriod is the grace period of LoanReturn evictions: how long a pod on loan
	// keeps running after the GPU's owner woke (its memory and work compete with the owner's
	// meanwhile). Default 5s; negative means none (0s).
	LoanReturnGracePeriod time.Duration

	// HoldTTL is how long capacity freed for a gang by evictions stays held if the gang is not
	// placed. Default 5m.
	HoldTTL time.Duration

	// MaxConsolidationsPerCycle bounds the consolidation what-ifs of one cycle. Default 4.
	MaxConsolidationsPerCycle int

	// SharesNeedInventory places fractional pods only on nodes that publish a GPU inventory
	// (Node.Inventory: a gpu-agent runs there). The scheduler runtime sets it: it learns the
	// device of a shared GPU from the node's agent, so a share on a node without one could never
	// be made true. Default false (the engine alone does not care).
	SharesNeedInventory bool

	// FairShareUsageWeight is how strongly recent usage (snapshot.Queue.Usage) moves the
	// division of the capacity above guarantees: the k of fairshare.Solver.UsageWeight. Default
	// 1; negative ignores usage. Without usage history (all Usage zero) it changes nothing.
	FairShareUsageWeight float64

	// Logger receives decisions at V(2) and what-ifs at V(5). Default: discard.
	Logger logr.Logger
}

// DefaultOptions are the defaults documented on Options: the one place they are written. The
// scheduler's flags take their defaults from it.
func DefaultOptions() Options { return Options{}.withDefaults() }

func (o Options) withDefaults() Options {
	if o.Placement == "" {
		o.Placement = BinPack
	}
	if o.StarvationThreshold == 0 {
		o.StarvationThreshold = 10 * time.Minute
	}
	if o.StaleGangGracePeriod == 0 {
		o.StaleGangGracePeriod = 60 * time.Second
	}
	if o.EvictionGracePeriod == 0 {
		o.EvictionGracePeriod = 30 * time.Second
	}
	switch {
	case o.LoanReturnGracePeriod == 0:
		o.LoanReturnGracePeriod = 5 * time.Second
	case o.LoanReturnGracePeriod < 0:
		o.LoanReturnGracePeriod = 0
	}
	if o.HoldTTL == 0 {
		o.HoldTTL = 5 * time.Minute
	}
	switch {
	case o.FairShareUsageWeight == 0:
		o.FairShareUsageWeight = 1
	case o.FairShareUsageWeight < 0:
		o.FairShareUsageWeight = 0
	}
	if o.MaxConsolidationsPerCycle == 0 {
		o.MaxConsolidationsPerCycle = 4
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}
