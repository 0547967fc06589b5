package v1alpha1

import "testing"

func TestPhysicalGPUs(t *testing.T) {
	cases := []struct {
		inv        *GPUInventory
		advertised int64
		want       int64
	}{
		{nil, 8, 8},                         // no inventory: the advertised devices are the GPUs
		{&GPUInventory{}, 8, 8},             // each GPU advertised once
		{&GPUInventory{Replicas: 1}, 8, 8},  // the same, said out loud
		{&GPUInventory{Replicas: 4}, 32, 8}, // 8 GPUs time-sliced 4 ways
		{&GPUInventory{Replicas: 4}, 28, 7}, // one GPU's replicas unhealthy
		{&GPUInventory{Replicas: 4}, 30, 8}, // a partial GPU still stands for one
		{&GPUInventory{Replicas: 4}, 0, 0},  // no devices
		{&GPUInventory{Replicas: 4}, -3, 0}, // never negative
		{&GPUInventory{Replicas: -2}, 8, 8}, // nonsense is ignored
	}
	for _, c := range cases {
		if got := c.inv.PhysicalGPUs(c.advertised); got != c.want {
			t.Errorf("%+v.PhysicalGPUs(%d) = %d, want %d", c.inv, c.advertised, got, c.want)
		}
	}
}
