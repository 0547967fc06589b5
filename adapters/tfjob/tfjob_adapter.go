// Package tfjob recognises the replica pods of a Kubeflow TFJob of the Training Operator v1
// (kubeflow.org/v1, pkg/controller.v1/tensorflow), through the Training Operator core
// (adapters/kubeflowjob). One job is one gang of all its replicas; each replica type (chief,
// master, ps, worker, evaluator) is a sub-group, and spec.runPolicy.schedulingPolicy.minAvailable,
// when set, is the gang's minimum instead, claimed by the chief and parameter servers first.
package tfjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "tfjob"

// Values the operator writes (tensorflow_types.go, tfjob_controller.go of training-operator v1.8.1).
const (
	// OperatorName is the operator-name label value of TFJob pods.
	OperatorName = "tfjob-controller"
	// Container is the operator's default container name for TFJob replicas.
	Container = "tensorflow"
)

// TFJobGVK is the kind this adapter reads.
var TFJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "TFJob"}

// Kind describes TFJob to the Training Operator core; replicas default to restartPolicy Never
// (tensorflow_defaults.go).
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  TFJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "tfReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyNever,
	Order:                []string{"Chief", "Master", "PS", "Worker", "Evaluator"},
}

// New returns the TFJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }
