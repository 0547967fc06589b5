//go:build cgo

package agent

import (
	"errors"
	"fmt"

	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
	"github.com/fairway-sched/fairway/gpu-agent/usage"
)

// Library is the GPU library of the agent and how its processes map to pods.
type Library struct {
	gpu.Library
	Resolver usage.PodResolver
	// Fake is the fake node in mock mode, nil on a real node.
	Fake *fakegpu.Node
}

// OpenLibrary returns the library o.NVML names, not yet initialised. Real and mock libraries
// sit behind the same go-nvml adapter.
func OpenLibrary(o *Options) (*Library, error) {
	procs := usage.ProcResolver{Root: o.ProcRoot}
	sys := o.MockSystem()
	if sys == "" {
		return &Library{Library: nvmllib.Open(), Resolver: procs}, nil
	}
	node, err := fakegpu.New(sys, o.NodeName)
	if err != nil {
		return nil, err
	}
	return &Library{Library: nvmllib.New(node), Resolver: usage.FirstResolver{node, procs}, Fake: node}, nil
}

// Explain turns an NVML initialisation failure into advice for the operator.
func Explain(err error) error {
	switch {
	case errors.Is(err, gpu.ErrLibraryNotFound):
		return fmt.Errorf("%w: libnvidia-ml.so.1 is not loadable here; is the NVIDIA driver installed on the node, "+
			"and does the agent's pod run with the nvidia runtime class (or mount the driver libraries)?", err)
	case errors.Is(err, gpu.ErrDriverNotLoaded):
		return fmt.Errorf("%w: the NVIDIA kernel module is not loaded on this node", err)
	}
	return err
}
