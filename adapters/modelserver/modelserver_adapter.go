// Package modelserver recognises replicas of the model servers teams deploy as plain Kubernetes
// workloads, with no operator of their own that labels the pods: NVIDIA Triton Inference Server
// and vLLM. Such a replica is inference: a gang of its own that an HPA adds and removes.
//
// The rule, which needs nothing from the user and looks only at the pod:
//
//  1. The pod is a replica of a long-running controller: its controller is a ReplicaSet (a
//     Deployment) or a StatefulSet. The same server run by a Job is batch work (offline batch
//     inference) and is not claimed; a bare pod is not either.
//  2. One of its containers runs the server: its image repository, without registry, tag and
//     digest, ends in tritonserver (nvcr.io/nvidia/tritonserver) for Triton, vllm-openai
//     (vllm/vllm-openai) or vllm (rocm/vllm) for vLLM; or its command line starts the server:
//     tritonserver, `vllm serve`, or the module vllm.entrypoints.openai.api_server, also inside
//     a `sh -c` string, which is how vLLM's own Kubernetes guide starts it.
//
// The matching container gets the GPU share. Workloads this rule misses (a server in an image of
// one's own, started by a script) are named inference with the fairway.dev/workload-kind label on
// the pod template instead.
package modelserver

import (
	"context"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/adapters"
)

// Server is one model server the package recognises.
type Server struct {
	// Name is the framework name written on its pods.
	Name string
	// Images are the last path elements of its image repositories.
	Images []string
	// Commands are the command lines (their leading words, executables by base name) that start
	// it.
	Commands [][]string
}

// The servers this package knows.
var (
	Triton = Server{Name: "triton", Images: []string{"tritonserver"}, Commands: [][]string{{"tritonserver"}}}
	VLLM   = Server{Name: "vllm", Images: []string{"vllm-openai", "vllm"}, Commands: [][]string{
		{"vllm", "serve"}, {"python", "-m", "vllm.entrypoints.openai.api_server"}, {"python3", "-m", "vllm.entrypoints.openai.api_server"},
	}}
)

// Adapter recognises the replicas of one model server.
type Adapter struct{ server Server }

var _ adapters.Adapter = (*Adapter)(nil)

// New returns the adapter of server.
func New(server Server) *Adapter { return &Adapter{server: server} }

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return a.server.Name }

// Recognize implements adapters.Adapter (see the package comment for the rule).
func (a *Adapter) Recognize(pod *corev1.Pod) bool {
	return servingController(pod) && a.container(pod) != ""
}

// Describe implements adapters.Adapter: inference, a gang of its own (named by the webhook), the
// GPU share on the server's container.
func (a *Adapter) Describe(_ context.Context, pod *corev1.Pod, _ adapters.ObjectReader) (adapters.Workload, error) {
	return adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: a.container(pod)}, nil
}

func servingController(pod *corev1.Pod) bool {
	return adapters.ControllerOfKind(pod, "apps", "ReplicaSet") != nil || adapters.ControllerOfKind(pod, "apps", "StatefulSet") != nil
}

// container is the name of the first container that runs the server, or "".
func (a *Adapter) container(pod *corev1.Pod) string {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if a.runsImage(c.Image) || a.runsCommand(c) {
			return c.Name
		}
	}
	return ""
}

func (a *Adapter) runsImage(image string) bool {
	repo := image
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	for _, name := range a.server.Images {
		if path.Base(repo) == name {
			return true
		}
	}
	return false
}

// runsCommand reads the container's command line (command then args); a shell's -c script is
// read as the command line it runs.
func (a *Adapter) runsCommand(c *corev1.Container) bool {
	words := append(append([]string{}, c.Command...), c.Args...)
	if len(words) >= 3 && isShell(words[0]) && words[1] == "-c" {
		words = strings.Fields(words[2])
	} else if len(words) == 1 {
		words = strings.Fields(words[0])
	}
	for _, cmd := range a.server.Commands {
		if hasPrefix(words, cmd) {
			return true
		}
	}
	return false
}

func isShell(s string) bool {
	switch path.Base(s) {
	case "sh", "bash", "dash", "zsh":
		return true
	}
	return false
}

// hasPrefix: words starts with prefix, the first word compared by base name (/usr/bin/python3).
func hasPrefix(words, prefix []string) bool {
	if len(words) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		w := words[i]
		if i == 0 {
			w = path.Base(w)
		}
		if w != p {
			return false
		}
	}
	return true
}
