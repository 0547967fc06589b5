// Package pytorchjob recognises the replica pods of a Kubeflow PyTorchJob (training-operator v1,
// kubeflow.org/v1) through the Training Operator core (adapters/kubeflowjob). One job is one gang;
// each replica type (master, worker) is a sub-group. The gang size follows the job's own minimum:
// runPolicy.schedulingPolicy.minAvailable, else the master plus elasticPolicy.minReplicas workers
// of an elastic job, else the sum of all replicas.
package pytorchjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Labels the training operator puts on replica pods (pkg/apis/kubeflow.org/v1/common_types.go).
const (
	JobNameLabel      = kubeflowjob.JobNameLabel
	OperatorNameLabel = kubeflowjob.OperatorNameLabel
	ReplicaTypeLabel  = kubeflowjob.ReplicaTypeLabel

	// OperatorName is the operator-name label value of PyTorchJob pods.
	OperatorName = "pytorchjob-controller"
	// Container is the container the operator requires in every replica template.
	Container = "pytorch"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "pytorchjob"

// PyTorchJobGVK is the kind this adapter reads.
var PyTorchJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "PyTorchJob"}

// Kind describes PyTorchJob to the Training Operator core (pytorch_types.go, pytorch_defaults.go).
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  PyTorchJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "pytorchReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyOnFailure,
	Order:                []string{"Master", "Worker"},
	ElasticType:          "Worker",
}

// New returns the PyTorchJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }

var adapter = New()

// Shape is a PyTorchJob's gang (kubeflowjob.Adapter.Shape): the Master whole and first, the
// Workers at elasticPolicy.minReplicas of an elastic job, all of them otherwise.
func Shape(job *unstructured.Unstructured) adapters.GangShape { return adapter.Shape(job) }

// MinMember is a PyTorchJob's gang size, Shape(job).MinMember.
func MinMember(job *unstructured.Unstructured) int32 { return Shape(job).MinMember }

// Restarted reports whether the operator brings a replica of the type back after its pod is
// evicted (its restartPolicy, OnFailure by default, is not Never).
func Restarted(job *unstructured.Unstructured, replicaType string) bool {
	return adapter.Restarted(job, replicaType)
}
