//go:build cgo

package fakegpu

import (
	"fmt"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// Checkpoints is the fake node's CUDA checkpoint API (checkpoint.API) over its processes, what
// the agent swaps with on a fake node: a checkpoint takes the process and its memory off the
// GPU (NVML lists neither), a restore puts them back if the GPU has the room, as the driver
// does. Memory has a size here, no contents: the byte-for-byte checks are checkpoint.Mock's.
func (n *Node) Checkpoints() checkpoint.API { return nodeCheckpoints{n} }

type nodeCheckpoints struct{ n *Node }

var _ checkpoint.API = nodeCheckpoints{}

// process finds pid on the node's devices; the caller holds mu.
func (n *Node) process(pid uint32) (*Device, Process, bool) {
	for _, d := range n.devices {
		for _, p := range d.state.Processes {
			if p.PID == pid {
				return d, p, true
			}
		}
	}
	return nil, Process{}, false
}

// ProcessCPU is the CPU time fake process pid has used (Process.CPUMillis), in any checkpoint
// state: the agent's CPU reader on a fake node.
func (n *Node) ProcessCPU(pid int) (time.Duration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, p, ok := n.process(uint32(pid))
	if !ok {
		return 0, fmt.Errorf("no fake process %d on node %s", pid, n.name)
	}
	return time.Duration(p.CPUMillis) * time.Millisecond, nil
}

// step moves pid from the state from to the state to, or returns the driver's error for op.
func (c nodeCheckpoints) step(op checkpoint.Op, pid int, from, to checkpoint.State, check func(d *Device, p Process) error) error {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	d, p, ok := n.process(uint32(pid))
	switch {
	case !ok:
		return checkpoint.DriverError(op, pid, checkpoint.ErrNoProcess)
	case n.ckpt[p.PID] != from:
		return checkpoint.DriverError(op, pid, checkpoint.ErrIllegalState)
	}
	if check != nil {
		if err := check(d, p); err != nil {
			return err
		}
	}
	if to == checkpoint.Running {
		delete(n.ckpt, p.PID)
	} else {
		n.ckpt[p.PID] = to
	}
	return nil
}

func (c nodeCheckpoints) State(pid int) (checkpoint.State, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if _, _, ok := c.n.process(uint32(pid)); !ok {
		return 0, checkpoint.DriverError(checkpoint.OpState, pid, checkpoint.ErrNoProcess)
	}
	return c.n.ckpt[uint32(pid)], nil
}

func (c nodeCheckpoints) Lock(pid int, _ time.Duration) error {
	return c.step(checkpoint.OpLock, pid, checkpoint.Running, checkpoint.Locked, nil)
}

func (c nodeCheckpoints) Checkpoint(pid int) error {
	return c.step(checkpoint.OpCheckpoint, pid, checkpoint.Locked, checkpoint.Checkpointed, func(_ *Device, p Process) error {
		if p.NotCheckpointable != "" {
			return checkpoint.DriverError(checkpoint.OpCheckpoint, pid, checkpoint.ErrNotSupported)
		}
		return nil
	})
}

func (c nodeCheckpoints) Restore(pid int) error {
	return c.step(checkpoint.OpRestore, pid, checkpoint.Checkpointed, checkpoint.Locked, func(d *Device, p Process) error {
		if d.usedLocked()+p.UsedMiB*mib > d.Device.MemoryInfo.Total {
			return checkpoint.DriverError(checkpoint.OpRestore, pid, checkpoint.ErrOutOfMemory)
		}
		return nil
	})
}

func (c nodeCheckpoints) Unlock(pid int) error {
	return c.step(checkpoint.OpUnlock, pid, checkpoint.Locked, checkpoint.Running, nil)
}
