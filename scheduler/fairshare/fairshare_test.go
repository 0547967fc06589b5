package fairshare

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gpu(quota, weight, limit, demand int64) []Resource {
	return []Resource{{Quota: quota, Weight: weight, Limit: limit, Demand: demand}}
}

// TestWorkedExample is the example of Solve's doc comment; keep the two in step.
func TestWorkedExample(t *testing.T) {
	queues := []Queue{
		{Parent: -1, Resources: gpu(6, 1, NoLimit, 0)}, // 0 A
		{Parent: 0, Resources: gpu(4, 1, NoLimit, 2)},  // 1 a1
		{Parent: 0, Resources: gpu(2, 3, NoLimit, 10)}, // 2 a2
		{Parent: -1, Resources: gpu(2, 1, NoLimit, 0)}, // 3 B
		{Parent: 3, Resources: gpu(2, 1, 6, 8)},        // 4 b1
	}
	var s Solver
	got := s.Solve(queues, []int64{10})
	want := [][]int64{{7}, {2}, {5}, {3}, {3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fair shares (-want +got):\n%s", diff)
	}
}

func TestSolve(t *testing.T) {
	cases := map[string]struct {
		queues   []Queue
		capacity []int64
		want     [][]int64
	}{
		"guarantee then borrow the rest": {
			// Product brief (a): A has 2 guaranteed GPUs, B none; both want the 8-GPU cluster.
			queues: []Queue{
				{Parent: -1, Resources: gpu(2, 1, NoLimit, 2)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 8)},
			},
			capacity: []int64{8},
			want:     [][]int64{{2}, {6}},
		},
		"weights divide the surplus": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 100)},
				{Parent: -1, Resources: gpu(0, 3, NoLimit, 100)},
			},
			capacity: []int64{8},
			want:     [][]int64{{2}, {6}},
		},
		"water-filling gives a small demand its need and the rest to the others": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 1)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 100)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 100)},
			},
			capacity: []int64{9},
			want:     [][]int64{{1}, {4}, {4}},
		},
		"limit caps the share": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 1, 3, 100)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 100)},
			},
			capacity: []int64{10},
			want:     [][]int64{{3}, {7}},
		},
		"weight zero takes only the leftovers": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 0, NoLimit, 100)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 6)},
			},
			capacity: []int64{10},
			want:     [][]int64{{4}, {6}},
		},
		"higher priority is satisfied first": {
			queues: []Queue{
				{Parent: -1, Priority: 0, Resources: gpu(0, 10, NoLimit, 100)},
				{Parent: -1, Priority: 1, Resources: gpu(0, 1, NoLimit, 7)},
			},
			capacity: []int64{10},
			want:     [][]int64{{3}, {7}},
		},
		"overcommitted guarantees are scaled down in proportion": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(6, 1, NoLimit, 6)},
				{Parent: -1, Resources: gpu(3, 1, NoLimit, 3)},
			},
			capacity: []int64{6},
			want:     [][]int64{{4}, {2}},
		},
		"remainder goes to the heavier weight": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 5000)},
				{Parent: -1, Resources: gpu(0, 2, NoLimit, 5000)},
			},
			capacity: []int64{1000},
			want:     [][]int64{{333}, {667}},
		},
		"no demand, no share": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(4, 1, NoLimit, 0)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 3)},
			},
			capacity: []int64{8},
			want:     [][]int64{{0}, {3}},
		},
		"two resources are independent": {
			queues: []Queue{
				{Parent: -1, Resources: []Resource{{Quota: 2, Weight: 1, Limit: NoLimit, Demand: 8}, {Weight: 1, Limit: NoLimit, Demand: 1000}}},
				{Parent: -1, Resources: []Resource{{Weight: 1, Limit: NoLimit, Demand: 8}, {Weight: 1, Limit: NoLimit, Demand: 64000}}},
			},
			capacity: []int64{8, 128000},
			want:     [][]int64{{5, 1000}, {3, 64000}},
		},
		"huge values do not overflow": {
			queues: []Queue{
				{Parent: -1, Resources: gpu(0, 1000000, NoLimit, 1<<62)},
				{Parent: -1, Resources: gpu(0, 1, NoLimit, 1<<62)},
			},
			capacity: []int64{1 << 61},
			want:     [][]int64{{2305840703372990580}, {2305840703372}}, // sums to 2^61
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s Solver
			got := s.Solve(tc.queues, tc.capacity)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fair shares (-want +got):\n%s", diff)
			}
			var sum int64
			for i, q := range tc.queues {
				if q.Parent < 0 {
					sum += got[i][0]
				}
			}
			if sum > tc.capacity[0] {
				t.Errorf("top-level shares %d exceed capacity %d", sum, tc.capacity[0])
			}
		})
	}
}

func TestSolveReusesBuffers(t *testing.T) {
	queues := []Queue{{Parent: -1, Resources: gpu(1, 1, NoLimit, 4)}, {Parent: 0, Resources: gpu(1, 1, NoLimit, 4)}}
	var s Solver
	s.Solve(queues, []int64{4})
	allocs := testing.AllocsPerRun(100, func() { s.Solve(queues, []int64{4}) })
	if allocs > 1 { // the capacity slice literal
		t.Errorf("Solve allocates %v times per call after warm-up", allocs)
	}
}

func used(quota, weight, demand int64, usage float64) []Resource {
	return []Resource{{Quota: quota, Weight: weight, Limit: NoLimit, Demand: demand, Usage: usage}}
}

// TestUsageAdjustsSurplus: recent usage moves the surplus between siblings of equal weight, never
// a guarantee, and nothing without usage or without a UsageWeight.
func TestUsageAdjustsSurplus(t *testing.T) {
	cases := map[string]struct {
		k        float64
		queues   []Queue
		capacity []int64
		want     [][]int64
	}{
		// docs/fair-share.md's worked example: a used 60% of the cluster over the window, b 30%,
		// c nothing (together 90%); each weighs a third, so each was entitled to 30%. Adjusted:
		// a 1/3-(0.6-0.3), b 1/3-(0.3-0.3), c 1/3+0.3: 12 GPUs divide 0.4 : 4 : 7.6.
		"heavy recent usage yields to a queue that had none": {
			k: 1,
			queues: []Queue{
				{Parent: -1, Resources: used(0, 1, 100000, 0.6)},
				{Parent: -1, Resources: used(0, 1, 100000, 0.3)},
				{Parent: -1, Resources: used(0, 1, 100000, 0)},
			},
			capacity: []int64{12000},
			want:     [][]int64{{399}, {4000}, {7601}}, // 400 and 7600 but for a milli-GPU of float rounding
		},
		"without a usage weight the weights alone divide": {
			queues: []Queue{
				{Parent: -1, Resources: used(0, 1, 100000, 0.6)},
				{Parent: -1, Resources: used(0, 1, 100000, 0.3)},
				{Parent: -1, Resources: used(0, 1, 100000, 0)},
			},
			capacity: []int64{12000},
			want:     [][]int64{{4000}, {4000}, {4000}},
		},
		"without usage the division is exact as before": {
			k: 1,
			queues: []Queue{
				{Parent: -1, Resources: used(0, 1, 100000, 0)},
				{Parent: -1, Resources: used(0, 2, 100000, 0)},
			},
			capacity: []int64{3000},
			want:     [][]int64{{1000}, {2000}},
		},
		// a had the whole cluster above its guarantee (usage share 1, b none): its adjusted weight
		// is 1/2-(1-1/2) = 0, so the 8 above the guarantees go to b, but a keeps its 4.
		"the guarantee is never affected": {
			k: 1,
			queues: []Queue{
				{Parent: -1, Resources: used(4000, 1, 100000, 1)},
				{Parent: -1, Resources: used(0, 1, 100000, 0)},
			},
			capacity: []int64{12000},
			want:     [][]int64{{4000}, {8000}},
		},
		// A heavy queue still takes what its siblings do not want.
		"a heavy queue takes what the others leave": {
			k: 1,
			queues: []Queue{
				{Parent: -1, Resources: used(0, 1, 100000, 1)},
				{Parent: -1, Resources: used(0, 1, 3000, 0)},
			},
			capacity: []int64{12000},
			want:     [][]int64{{9000}, {3000}},
		},
		// The department D used half the cluster, all of it through d1; E nothing: between
		// departments D yields to E; inside D, d1 yields to d2.
		"a department's history counts for its projects": {
			k: 1,
			queues: []Queue{
				{Parent: -1, Resources: used(0, 1, 0, 0.5)},     // 0 D
				{Parent: 0, Resources: used(0, 1, 100000, 0.5)}, // 1 d1
				{Parent: 0, Resources: used(0, 1, 100000, 0)},   // 2 d2
				{Parent: -1, Resources: used(0, 1, 0, 0)},       // 3 E
				{Parent: 3, Resources: used(0, 1, 100000, 0)},   // 4 e1
			},
			capacity: []int64{8000},
			// Top (siblings used 0.5, so each was entitled to 0.25): D 1/2-(0.5-0.25) = 0.25, E
			// 1/2+0.25 = 0.75: D 2000, E 6000. Inside D, the same: d1 0.25, d2 0.75: 500 and 1500.
			want: [][]int64{{2000}, {500}, {1500}, {6000}, {6000}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := Solver{UsageWeight: tc.k}
			got := s.Solve(tc.queues, tc.capacity)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fair shares (-want +got):\n%s", diff)
			}
		})
	}
}
