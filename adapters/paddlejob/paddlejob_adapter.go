// Package paddlejob recognises the replica pods of a Kubeflow PaddleJob of the Training Operator
// v1 (kubeflow.org/v1, pkg/controller.v1/paddlepaddle), through the Training Operator core
// (adapters/kubeflowjob). One job is one gang of its master and workers (sub-groups master and
// worker). An elastic job (spec.elasticPolicy.minReplicas) needs only that many workers; above
// them, workers join the running gang as capacity allows. spec.runPolicy.schedulingPolicy.
// minAvailable, when set, is the gang's minimum instead.
package paddlejob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "paddlejob"

// Values the operator writes (paddlepaddle_types.go, paddlepaddle_controller.go of
// training-operator v1.8.1).
const (
	// OperatorName is the operator-name label value of PaddleJob pods.
	OperatorName = "paddlejob-controller"
	// Container is the operator's default container name for PaddleJob replicas.
	Container = "paddle"
)

// PaddleJobGVK is the kind this adapter reads.
var PaddleJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "PaddleJob"}

// Kind describes PaddleJob to the Training Operator core; replicas default to restartPolicy
// OnFailure (paddlepaddle_defautls.go).
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  PaddleJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "paddleReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyOnFailure,
	Order:                []string{"Master", "Worker"},
	ElasticType:          "Worker",
}

// New returns the PaddleJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }
