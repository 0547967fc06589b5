package snapshot

// Demand is one class of GPU requests the cluster has seen: the pods' node constraints, the
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

// Demands counts the GPU requests of the fairway pods in the snapshot (pending, bound and
// releasing; not succeeded ones, shadows or reservations) by class. DemandVersion changes
// whenever a count does. Requests by GPU memory are left out: their share depends on the GPU.
func (s *Snapshot) Demands() map[Demand]int32 { return s.demand }

// DemandVersion changes whenever Demands does.
func (s *Snapshot) DemandVersion() uint64 { return s.demandGen }

func (s *Snapshot) countDemand(t *Task, sign int32) {
	r := &t.Req
	if t.shadow || r.Reservation || r.GPUMemoryMiB > 0 || (r.WholeGPUs == 0 && r.FractionMilli == 0) {
		return
	}
	d := Demand{Class: t.Class, PerGPUMilli: MilliPerGPU, GPUs: r.WholeGPUs, MilliCPU: r.MilliCPU}
	if r.WholeGPUs == 0 {
		d.PerGPUMilli, d.GPUs = r.FractionMilli, 1
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
