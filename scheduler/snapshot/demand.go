package snapshot

// Key identifies the class: equal keys, equal constraints.
func (c *FilterClass) Key() string { return c.key }

// Demand is one class of requests the cluster has seen: the pods' node constraints, the
// share of each GPU they take, how many GPUs, and their CPU. The engine weighs the leftovers of
// a placement by what such requests could still use (fragmentation-aware placement).
type Demand struct {
	Class *FilterClass
	// PerGPUMilli is the share of each GPU: FractionMilli for a share, 1000 for whole GPUs.
	PerGPUMilli int64
	// GPUs is the number of GPUs (1 for a share).
	GPUs     int64
	MilliCPU int64
}

// Demands counts the requests of the fairway pods in the snapshot (pending, bound and
// releasing; not succeeded ones, shadows or reservations) by class; pods without GPUs have
// GPUs and PerGPUMilli 0. DemandVersion changes
// whenever a count does. Requests by GPU memory are left out: their share depends on the GPU.
func (s *Snapshot) Demands() map[Demand]int32 { return s.demand }

// DemandVersion changes whenever Demands does.
func (s *Snapshot) DemandVersion() uint64 { return s.demandGen }

// ShareDemands is how many of the pods Demands counts ask for a share of a GPU: where none does,
// no GPU is left partly used and placement needs no fragmentation model (a counter, so that the
// engine learns it without reading the map).
func (s *Snapshot) ShareDemands() int32 { return s.shareDemands }

func (s *Snapshot) countDemand(t *Task, sign int32) {
	r := &t.Req
	if t.shadow || r.Reservation || r.GPUMemoryMiB > 0 {
		return
	}
	d := Demand{Class: t.Class, PerGPUMilli: MilliPerGPU, GPUs: r.WholeGPUs, MilliCPU: r.MilliCPU}
	switch {
	case r.FractionMilli > 0:
		d.PerGPUMilli, d.GPUs = r.FractionMilli, 1
		s.shareDemands += sign
	case r.WholeGPUs == 0:
		d.PerGPUMilli = 0
	}
	if s.demand == nil {
		s.demand = make(map[Demand]int32)
	}
	if n := s.demand[d] + sign; n > 0 {
		s.demand[d] = n
	} else {
		delete(s.demand, d)
	}
	s.demandGen++
}
