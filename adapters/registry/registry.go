// Package registry lists fairway's adapters in the order the webhook asks them. It is its own
// package so that the adapters package, which every adapter imports, does not import them back.
package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/airflow"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/jaxjob"
	"github.com/fairway-sched/fairway/adapters/jobset"
	"github.com/fairway-sched/fairway/adapters/jupyterhub"
	"github.com/fairway-sched/fairway/adapters/kfp"
	"github.com/fairway-sched/fairway/adapters/knative"
	"github.com/fairway-sched/fairway/adapters/kserve"
	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	"github.com/fairway-sched/fairway/adapters/lws"
	"github.com/fairway-sched/fairway/adapters/mlflow"
	"github.com/fairway-sched/fairway/adapters/modelserver"
	"github.com/fairway-sched/fairway/adapters/mpijob"
	"github.com/fairway-sched/fairway/adapters/paddlejob"
	"github.com/fairway-sched/fairway/adapters/plainpod"
	"github.com/fairway-sched/fairway/adapters/pytorchjob"
	"github.com/fairway-sched/fairway/adapters/tfjob"
	"github.com/fairway-sched/fairway/adapters/usergang"
	"github.com/fairway-sched/fairway/adapters/xgboostjob"
)

// All returns every adapter, most specific first: the first adapter that recognises a pod claims
// it, so one workload is never managed twice. Kubeflow Pipelines comes before Argo because KFP
// pods are Argo pods too; LeaderWorkerSet groups, KServe and Knative replicas come before the
// model-server rule (Triton, vLLM) because they often run those servers, and KServe before
// Knative because its Serverless predictors are Knative revisions; gangs users name themselves
// (usergang) come after every framework, which knows its own pods' gangs better, and the
// plain-pod fallback comes last and claims the rest.
func All() []adapters.Adapter {
	return []adapters.Adapter{
		kfp.New(),
		argo.New(),
		kuberay.New(),
		// Before JupyterHub, whose notebook shape (container 0 "notebook", port notebook-port)
		// a Kubeflow notebook named "notebook" has too.
		kubeflownotebook.New(),
		jupyterhub.New(),
		pytorchjob.New(),
		mpijob.New(),
		tfjob.New(),
		xgboostjob.New(),
		paddlejob.New(),
		jaxjob.New(),
		jobset.New(),
		airflow.New(),
		mlflow.New(),
		// Inference.
		lws.New(),
		kserve.New(),
		knative.New(),
		modelserver.New(modelserver.Triton),
		modelserver.New(modelserver.VLLM),
		usergang.New(),
		plainpod.New(),
	}
}

// Match returns the first adapter in list that recognises pod, or nil when none does (a list
// that ends with the plain-pod fallback always matches).
func Match(list []adapters.Adapter, pod *corev1.Pod) adapters.Adapter {
	for _, a := range list {
		if a.Recognize(pod) {
			return a
		}
	}
	return nil
}

// WatchedKinds collects the kinds the adapters in list read (adapters.ObjectWatcher), without
// duplicates, in list order. This is the one place optional adapter interfaces are discovered.
func WatchedKinds(list []adapters.Adapter) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	seen := map[schema.GroupVersionKind]bool{}
	for _, a := range list {
		w, ok := a.(adapters.ObjectWatcher)
		if !ok {
			continue
		}
		for _, gvk := range w.WatchedKinds() {
			if !seen[gvk] {
				seen[gvk] = true
				kinds = append(kinds, gvk)
			}
		}
	}
	return kinds
}

// GangShapers returns the adapters of list whose gangs follow their owner objects
// (adapters.GangShaper), in order.
func GangShapers(list []adapters.Adapter) []adapters.GangShaper {
	var out []adapters.GangShaper
	for _, a := range list {
		if s, ok := a.(adapters.GangShaper); ok {
			out = append(out, s)
		}
	}
	return out
}
