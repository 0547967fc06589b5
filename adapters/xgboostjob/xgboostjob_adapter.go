// Package xgboostjob recognises the replica pods of a Kubeflow XGBoostJob of the Training
// Operator v1 (kubeflow.org/v1, pkg/controller.v1/xgboost), through the Training Operator core
// (adapters/kubeflowjob). One job is one gang of its master and workers (sub-groups master and
// worker); spec.runPolicy.schedulingPolicy.minAvailable, when set, is the gang's minimum instead.
package xgboostjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "xgboostjob"

// Values the operator writes (xgboost_types.go, xgboostjob_controller.go of training-operator
// v1.8.1).
const (
	// OperatorName is the operator-name label value of XGBoostJob pods.
	OperatorName = "xgboostjob-controller"
	// Container is the operator's default container name for XGBoostJob replicas.
	Container = "xgboost"
)

// XGBoostJobGVK is the kind this adapter reads.
var XGBoostJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "XGBoostJob"}

// Kind describes XGBoostJob to the Training Operator core; replicas default to restartPolicy
// Never (xgboost_defaults.go).
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  XGBoostJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "xgbReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyNever,
	Order:                []string{"Master", "Worker"},
}

// New returns the XGBoostJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }
