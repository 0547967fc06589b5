// Package bitset is a dense set of small non-negative integers. The engine keeps node indexes
// (nodes by free GPUs, nodes a pod's constraints allow, nodes of a topology domain) as bitsets so
// that "the first node in all these sets" is a few word ANDs instead of a scan over every node.
package bitset

import "math/bits"

// Set is a bitset; the zero value is empty. Bit i is node id i.
type Set []uint64

// Add sets bit i, growing the set as needed.
func (s *Set) Add(i int) {
	w := i >> 6
	if w >= len(*s) {
		grown := make(Set, w+1, max(w+1, 2*len(*s)))
		copy(grown, *s)
		*s = grown
	}
	(*s)[w] |= 1 << (uint(i) & 63)
}

// Remove clears bit i.
func (s Set) Remove(i int) {
	if w := i >> 6; w < len(s) {
		s[w] &^= 1 << (uint(i) & 63)
	}
}

// Has reports whether bit i is set.
func (s Set) Has(i int) bool {
	w := i >> 6
	return w < len(s) && s[w]&(1<<(uint(i)&63)) != 0
}

// Count is the number of bits set.
func (s Set) Count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Clear removes every bit and keeps the storage.
func (s Set) Clear() {
	clear(s)
}

// NextAnd returns the smallest i >= from that is in a, in b and in c, or -1. A nil b or c stands
// for "every bit" so callers can pass one, two or three sets without allocating.
func NextAnd(a, b, c Set, from int) int {
	if from < 0 {
		from = 0
	}
	n := len(a)
	if b != nil {
		n = min(n, len(b))
	}
	if c != nil {
		n = min(n, len(c))
	}
	for w := from >> 6; w < n; w++ {
		x := a[w]
		if b != nil {
			x &= b[w]
		}
		if c != nil {
			x &= c[w]
		}
		if w == from>>6 {
			x &= ^uint64(0) << (uint(from) & 63)
		}
		if x != 0 {
			return w<<6 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// CountAnd is the number of bits set in a, b and c (nil b or c: every bit).
func CountAnd(a, b, c Set) int {
	n := len(a)
	if b != nil {
		n = min(n, len(b))
	}
	if c != nil {
		n = min(n, len(c))
	}
	total := 0
	for w := 0; w < n; w++ {
		x := a[w]
		if b != nil {
			x &= b[w]
		}
		if c != nil {
			x &= c[w]
		}
		total += bits.OnesCount64(x)
	}
	return total
}
