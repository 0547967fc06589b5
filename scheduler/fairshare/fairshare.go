package fairshare

import (
	"math/bits"
	"slices"
)

// NoLimit is the Limit of a resource that has none.
const NoLimit int64 = -1

// Resource is one queue's terms for one resource, in the resource's integer unit (milli-GPU,
// milli-CPU, bytes).
type Resource struct {
	// Quota is the guaranteed amount: the queue gets min(Quota, Demand) before any queue borrows.
	Quota int64
	// Weight divides capacity above the guarantees among siblings that want more. Weight 0 takes
	// only what no sibling with a positive weight wants.
	Weight int64
	// Limit caps the fair share (and everything the queue may hold); NoLimit for none.
	Limit int64
	// Demand is what a leaf queue holds plus what its pending pods ask for. It is ignored for a
	// queue with children: a parent's demand is the sum of its children's, each capped by its limit.
	Demand int64
	// Usage is the queue's recent use of the resource above its guarantee: decayed, over the
	// decayed capacity of the cluster (see Solver.UsageWeight), so a fraction in [0, 1]. 0
	// without history.
	Usage float64
}

// Queue is one node of the queue tree.
type Queue struct {
	// Parent is the index of the parent queue in the slice passed to Solve, or -1 at the top.
	// Parents may appear after their children; cycles are the caller's bug and are not detected.
	Parent int
	// Priority orders siblings when the capacity above guarantees is divided: a higher priority
	// is satisfied in full before a lower one gets anything.
	Priority int32
	// Resources holds one entry per resource dimension, in the same order as the capacity.
	Resources []Resource
}

// Solver computes fair shares. It keeps scratch buffers between calls so that a scheduling cycle
// does not allocate; the zero value is ready to use. A Solver is not safe for concurrent use.
type Solver struct {
	// UsageWeight is how strongly recent usage moves the division of the surplus (the k of the
	// formula in Solve's doc comment). 0 divides by the weights alone, whatever the Usage.
	UsageWeight float64

	children [][]int
	tops     []int
	demand   []int64
	given    []int64
	need     []int64
	active   []int
	order    []int
	fair     [][]int64
	adjusted []int64
}

// Solve returns fair[q][d], the fair share of queue q in resource d, given the capacity of each
// resource. The returned slices are owned by the Solver and valid until the next call.
//
// # Algorithm
//
// Resources are independent: each dimension d is solved on its own (resources then compete in
// the engine through the dominant share, the largest allocated/fair ratio of a queue across
// resources, which orders allocation and picks reclaim victims). For one resource the tree is
// walked top-down; a level divides what its parent got (the cluster capacity at the top) among
// its children in two rounds:
//
//  1. Guarantees. Each child gets min(Quota, capped demand), where capped demand is
//     min(Demand, Limit) for a leaf and min(sum of the children's capped demands, Limit) for a
//     parent. When these guarantees add up to more than is available (an overcommitted tree),
//     what is available is divided in proportion to them.
//  2. Surplus. What is left is divided among children whose capped demand is still unmet, highest
//     Priority first. Within one priority it is water-filled by Weight: each child is offered
//     surplus*weight/sum(weights); a child offered more than it still needs takes only its need
//     and leaves the rounds, and the rest is offered again to the others until nothing is left or
//     everyone is satisfied. Children of weight 0 are water-filled (equally) only with what the
//     positive weights leave.
//
// # Usage over time
//
// With a positive UsageWeight k and some recent usage among the siblings, round 2 divides by
// adjusted weights instead of the weights. Usage here is what a queue held above its guarantee
// (Resource.Usage: decayed, as a fraction of the cluster's decayed capacity): a child's
// entitlement to what the siblings used above their guarantees is its weight's fraction w of the
// siblings' positive weights; a child that used more than that gives up surplus in proportion to
// the excess, one that used less gains:
//
//	adjusted = w - k * (usage - w * siblingsUsage)
//
// A child whose adjusted weight comes out at or below zero keeps the smallest positive weight: it
// takes only what its siblings leave, still before siblings of weight 0. Round 1 is never
// adjusted, and use within a guarantee is not usage here: a queue below its guarantee always gets
// it, and one that only ever used its guarantee loses nothing. docs/fair-share.md has a worked
// example.
//
// Shares are integers: when a division does not come out even, the remainder units go one each to
// the children with the largest weight, then the lowest index. Surplus nobody demands stays
// undivided, so a fair share never exceeds the queue's capped demand.
//
// # Worked example (one resource, GPUs, capacity 10)
//
//	A   department  quota 6  weight 1                     children a1, a2
//	a1  project     quota 4  weight 1  demand 2
//	a2  project     quota 2  weight 3  demand 10
//	B   department  quota 2  weight 1                     child b1
//	b1  project     quota 2  weight 1  demand 8  limit 6
//
// Capped demands: b1 = min(8, 6) = 6, so B = 6; A = 2 + 10 = 12.
// Top level, 10 GPUs: guarantees A = min(6, 12) = 6, B = min(2, 6) = 2; 2 are left. A and B
// both still want more and weigh 1 each: each is offered 1, neither is satisfied, so A = 7, B = 3.
// Inside A, 7 GPUs: guarantees a1 = min(4, 2) = 2 and a2 = min(2, 10) = 2; a1 wants nothing more,
// so a2 takes the 3 left: a1 = 2, a2 = 5. Inside B, 3 GPUs: b1 = 2 guaranteed + 1 = 3.
// Fair shares: a1 2, a2 5, b1 3. a1's unused guarantee went to its sibling a2 first (siblings
// share a department's capacity before other departments do), and a2's weight 3 did not matter
// because it was the only child left wanting more.
func (s *Solver) Solve(queues []Queue, capacity []int64) [][]int64 {
	n := len(queues)
	s.children = resize(s.children, n)
	for i := range s.children {
		s.children[i] = s.children[i][:0]
	}
	s.tops = s.tops[:0]
	for i, q := range queues {
		if q.Parent >= 0 && q.Parent < n {
			s.children[q.Parent] = append(s.children[q.Parent], i)
		} else {
			s.tops = append(s.tops, i)
		}
	}
	s.fair = resize(s.fair, n)
	for i := range s.fair {
		s.fair[i] = resizeZero(s.fair[i], len(capacity))
	}
	s.demand = resizeZero(s.demand, n)
	s.given = resizeZero(s.given, n)
	s.need = resizeZero(s.need, n)
	for d := range capacity {
		for _, t := range s.tops {
			s.cappedDemand(queues, t, d)
		}
		s.divide(queues, s.tops, capacity[d], d)
	}
	return s.fair
}

// cappedDemand fills s.demand[q] for q and its subtree for dimension d.
func (s *Solver) cappedDemand(queues []Queue, q, d int) int64 {
	r := res(queues[q], d)
	var dem int64
	if len(s.children[q]) == 0 {
		dem = max(r.Demand, 0)
	} else {
		for _, c := range s.children[q] {
			dem += s.cappedDemand(queues, c, d)
		}
	}
	if r.Limit >= 0 {
		dem = min(dem, r.Limit)
	}
	s.demand[q] = dem
	return dem
}

// divide gives the siblings their shares of avail in dimension d and recurses into each.
func (s *Solver) divide(queues []Queue, siblings []int, avail int64, d int) {
	if len(siblings) == 0 {
		return
	}
	// Round 1: guarantees, proportional when they do not all fit.
	var sumGuar int64
	for _, c := range siblings {
		g := min(max(res(queues[c], d).Quota, 0), s.demand[c])
		s.need[c] = g
		s.given[c] = 0
		sumGuar += g
	}
	if sumGuar <= avail {
		for _, c := range siblings {
			s.given[c] = s.need[c]
		}
		avail -= sumGuar
	} else {
		avail = s.waterfill(siblings, avail, func(c int) int64 { return s.need[c] })
	}
	// Round 2: surplus by priority, then (usage-adjusted) weight.
	weight := func(c int) int64 { return max(res(queues[c], d).Weight, 0) }
	if s.adjust(queues, siblings, d) {
		weight = func(c int) int64 { return s.adjusted[c] }
	}
	s.order = append(s.order[:0], siblings...)
	slices.SortStableFunc(s.order, func(a, b int) int {
		return int(queues[b].Priority) - int(queues[a].Priority)
	})
	prio := s.order
	for len(prio) > 0 && avail > 0 {
		p := queues[prio[0]].Priority
		end := 1
		for end < len(prio) && queues[prio[end]].Priority == p {
			end++
		}
		level := prio[:end]
		prio = prio[end:]
		for _, c := range level {
			s.need[c] = s.demand[c] - s.given[c]
		}
		avail = s.waterfill(level, avail, weight)
		for _, c := range level {
			s.need[c] = s.demand[c] - s.given[c]
		}
		avail = s.waterfill(level, avail, func(c int) int64 {
			if res(queues[c], d).Weight <= 0 {
				return 1
			}
			return 0
		})
	}
	for _, c := range siblings {
		s.fair[c][d] = s.given[c]
	}
	// Recurse with each child's share. The children slices are stable for the whole Solve call.
	for _, c := range siblings {
		s.divide(queues, s.children[c], s.given[c], d)
	}
}

// adjustedScale is the integer unit of adjusted weights: a weight fraction of 1 is this many.
const adjustedScale = 1 << 30

// adjust fills s.adjusted for the siblings in dimension d and reports whether it applies: only
// with a positive UsageWeight and some usage among the siblings. Without usage every adjusted
// weight would be w: the division by the weights alone, which is then kept exact.
func (s *Solver) adjust(queues []Queue, siblings []int, d int) bool {
	if s.UsageWeight <= 0 {
		return false
	}
	var weights int64
	var usage float64
	for _, c := range siblings {
		r := res(queues[c], d)
		weights += max(r.Weight, 0)
		usage += max(r.Usage, 0)
	}
	if usage <= 0 || weights == 0 {
		return false
	}
	s.adjusted = resize(s.adjusted, len(queues))
	for _, c := range siblings {
		r := res(queues[c], d)
		if r.Weight <= 0 {
			s.adjusted[c] = 0
			continue
		}
		w := float64(r.Weight) / float64(weights)
		a := w - s.UsageWeight*(max(r.Usage, 0)-w*usage)
		s.adjusted[c] = max(int64(a*adjustedScale), 1)
	}
	return true
}

// waterfill divides avail among members by weight, each capped at s.need[c], adding to
// s.given[c] and lowering s.need[c]. It returns what is left undivided.
func (s *Solver) waterfill(members []int, avail int64, weight func(int) int64) int64 {
	s.active = s.active[:0]
	for _, c := range members {
		if s.need[c] > 0 && weight(c) > 0 {
			s.active = append(s.active, c)
		}
	}
	for avail > 0 && len(s.active) > 0 {
		var total int64
		for _, c := range s.active {
			total += weight(c)
		}
		// Children whose offer covers their need take just their need, and the round repeats
		// with the others. Offers are computed from the same avail and total for everyone.
		kept := s.active[:0]
		var spent int64
		for _, c := range s.active {
			if mulDiv(avail, weight(c), total) >= s.need[c] {
				s.given[c] += s.need[c]
				spent += s.need[c]
				s.need[c] = 0
				continue
			}
			kept = append(kept, c)
		}
		if spent > 0 {
			avail -= spent
			s.active = kept
			continue
		}
		// Nobody is satisfied: everyone takes their (rounded down) offer.
		for _, c := range s.active {
			o := mulDiv(avail, weight(c), total)
			s.given[c] += o
			s.need[c] -= o
			spent += o
		}
		avail -= spent
		// Fewer units than members remain; hand them out by weight, then index.
		slices.SortStableFunc(s.active, func(a, b int) int {
			if wa, wb := weight(a), weight(b); wa != wb {
				if wa > wb {
					return -1
				}
				return 1
			}
			return a - b
		})
		for _, c := range s.active {
			if avail == 0 {
				break
			}
			if s.need[c] > 0 {
				s.given[c]++
				s.need[c]--
				avail--
			}
		}
		break
	}
	return avail
}

func res(q Queue, d int) Resource {
	if d < len(q.Resources) {
		return q.Resources[d]
	}
	return Resource{Weight: 1, Limit: NoLimit}
}

// mulDiv returns floor(a*b/c) for 0 <= a, 0 <= b <= c, without overflow.
func mulDiv(a, b, c int64) int64 {
	if c <= 0 || a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return append(s[:cap(s)], make([]T, n-cap(s))...)[:n]
	}
	return s[:n]
}

func resizeZero(s []int64, n int) []int64 {
	s = resize(s, n)
	clear(s)
	return s
}
