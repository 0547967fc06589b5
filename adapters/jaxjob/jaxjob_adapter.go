// Package jaxjob recognises the worker pods of a Kubeflow JAXJob (kubeflow.org/v1, added in
// training-operator v1.9, pkg/controller.v1/jax), through the Training Operator core
// (adapters/kubeflowjob). One job is one gang of all its workers (sub-group worker);
// spec.runPolicy.schedulingPolicy.minAvailable, when set, is the gang's minimum instead.
package jaxjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "jaxjob"

// Values the operator writes (jax_types.go, jaxjob_controller.go of training-operator v1.9).
const (
	// OperatorName is the operator-name label value of JAXJob pods.
	OperatorName = "jaxjob-controller"
	// Container is the operator's default container name for JAXJob replicas.
	Container = "jax"
)

// JAXJobGVK is the kind this adapter reads.
var JAXJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "JAXJob"}

// Kind describes JAXJob to the Training Operator core; replicas default to restartPolicy Never.
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  JAXJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "jaxReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyNever,
	Order:                []string{"Worker"},
}

// New returns the JAXJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }
