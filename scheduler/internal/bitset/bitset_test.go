package bitset

import "testing"

func TestNextAnd(t *testing.T) {
	var a, b Set
	for _, i := range []int{1, 5, 64, 70, 200} {
		a.Add(i)
	}
	for _, i := range []int{5, 70, 199, 200} {
		b.Add(i)
	}
	var got []int
	for i := NextAnd(a, b, nil, 0); i >= 0; i = NextAnd(a, b, nil, i+1) {
		got = append(got, i)
	}
	want := []int{5, 70, 200}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if n := CountAnd(a, b, nil); n != 3 {
		t.Errorf("CountAnd = %d, want 3", n)
	}
	a.Remove(70)
	if a.Has(70) || !a.Has(64) || a.Count() != 4 {
		t.Errorf("Remove/Has/Count wrong: %v", a)
	}
	if i := NextAnd(a, nil, nil, 201); i != -1 {
		t.Errorf("NextAnd past end = %d, want -1", i)
	}
}
