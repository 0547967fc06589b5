// Package mpijob recognises the pods of a Kubeflow MPIJob of the Training Operator v1
// (kubeflow.org/v1, pkg/controller.v1/mpi), through the Training Operator core
// (adapters/kubeflowjob). The operator creates the workers (<job>-worker-<i>) and then the
// launcher (<job>-launcher), which runs mpirun against them: one job is one gang of the launcher
// and all its workers, so the launcher never starts without its workers nor the workers without
// their launcher. The sub-groups are launcher (1) and worker (spec.mpiReplicaSpecs.Worker.replicas);
// spec.runPolicy.schedulingPolicy.minAvailable, when set, is the gang's minimum instead.
//
// (The standalone MPI Operator's kubeflow.org/v2beta1 MPIJob labels its pods differently and is
// not this adapter's.)
package mpijob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
)

// Name is the framework name on the pods this adapter recognises.
const Name = "mpijob"

// Values the operator writes (mpi_types.go, mpijob_controller.go of training-operator v1.8.1).
const (
	// OperatorName is the operator-name label value of MPIJob pods.
	OperatorName = "mpijob-controller"
	// Container is the operator's default container name for MPIJob replicas.
	Container = "mpi"
	// LauncherType and WorkerType are the replica-type label values of the launcher and workers.
	LauncherType = "launcher"
	WorkerType   = "worker"
)

// MPIJobGVK is the kind this adapter reads.
var MPIJobGVK = schema.GroupVersionKind{Group: kubeflowjob.Group, Version: "v1", Kind: "MPIJob"}

// Kind describes MPIJob to the Training Operator core. Both replica types default to
// restartPolicy Never (mpi_defaults.go), and whatever the policy the controller fails the job
// when its launcher pod fails (an eviction on a real node does) and never replaces a failed
// worker: no MPIJob pod is recreatable.
var Kind = kubeflowjob.Kind{
	Framework:            Name,
	GVK:                  MPIJobGVK,
	OperatorName:         OperatorName,
	ReplicaSpecsField:    "mpiReplicaSpecs",
	Container:            Container,
	DefaultRestartPolicy: corev1.RestartPolicyNever,
	Order:                []string{"Launcher", "Worker"},
	FailedReplicasFail:   true,
}

// New returns the MPIJob adapter.
func New() *kubeflowjob.Adapter { return kubeflowjob.New(Kind) }
