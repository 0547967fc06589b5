package runprofile

import (
	"math/rand/v2"
	"testing"
)

// closure returns reach[i][j]: j runs before i.
func closure(preds [][]int) [][]bool {
	n := len(preds)
	reach := make([][]bool, n) // reach[i][j]: j is before i
	var visit func(i, j int)
	visit = func(i, j int) {
		for _, p := range preds[j] {
			if !reach[i][p] {
				reach[i][p] = true
				visit(i, p)
			}
		}
	}
	for i := range n {
		reach[i] = make([]bool, n)
		visit(i, i)
	}
	return reach
}

// bruteAntichain tries every subset.
func bruteAntichain(preds [][]int, w []int64) int64 {
	n := len(w)
	reach := closure(preds)
	var best int64
	for mask := 0; mask < 1<<n; mask++ {
		var sum int64
		ok := true
		for i := 0; i < n && ok; i++ {
			if mask&(1<<i) == 0 {
				continue
			}
			sum += w[i]
			for j := 0; j < n; j++ {
				if mask&(1<<j) != 0 && reach[i][j] {
					ok = false
					break
				}
			}
		}
		if ok {
			best = max(best, sum)
		}
	}
	return best
}

func TestMaxAntichainMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := 1 + r.IntN(9)
		preds := make([][]int, n)
		w := make([]int64, n)
		for i := range n {
			w[i] = int64(r.IntN(5)) * int64(1+r.IntN(3)*1000)
			for j := range i {
				if r.IntN(3) == 0 {
					preds[i] = append(preds[i], j)
				}
			}
		}
		want := bruteAntichain(preds, w)
		got, set := maxAntichain(preds, w)
		if got != want {
			t.Fatalf("case %d: preds %v weights %v: got %d, want %d", iter, preds, w, got, want)
		}
		var sum int64
		for _, i := range set {
			sum += w[i]
		}
		reach := closure(preds)
		for _, i := range set {
			for _, j := range set {
				if reach[i][j] && w[i] > 0 && w[j] > 0 {
					t.Fatalf("case %d: preds %v: %d and %d of the set %v are ordered", iter, preds, i, j, set)
				}
			}
		}
		if sum != got {
			t.Fatalf("case %d: preds %v weights %v: the set %v weighs %d, not %d", iter, preds, w, set, sum, got)
		}
	}
}
