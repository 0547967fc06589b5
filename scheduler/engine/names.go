package engine

import (
	"strconv"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// claimantName names the gang an eviction makes room for as its users know it, once, for the
// eviction's message: the pod of a gang of one pod (a Deployment's replica, whose PodGroup is
// one the webhook made up), else the gang; then its kind of work and the object that made it.
// "pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve)", "gang team-a/train
// (training PyTorchJob train)", "pod team-a/debug".
func claimantName(g *snapshot.Gang) string {
	name := "gang " + g.Key.Namespace + "/" + g.Key.Name
	kind := v1alpha1.WorkloadKind("")
	if len(g.Tasks) > 0 {
		kind = g.Tasks[0].Kind
	}
	if len(g.Tasks) == 1 {
		name = "pod " + g.Tasks[0].Key.String()
	}
	what := ""
	if kind != "" && kind != v1alpha1.KindPod {
		what = string(kind)
	}
	if w := g.Workload.String(); w != "" {
		if what != "" {
			what += " "
		}
		what += w
	}
	if what == "" {
		return name
	}
	return name + " (" + what + ")"
}

// count is n with its noun: "1 pod", "4 pods", never "1 pods".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// gpus is an amount of GPU (in milli-GPUs) with its noun: "1 GPU", "0.5 GPUs", "4 GPUs".
func gpus(milli int64) string {
	s := snapshot.FormatAmount(snapshot.DimGPU, milli)
	if s == "1" {
		return "1 GPU"
	}
	return s + " GPUs"
}
