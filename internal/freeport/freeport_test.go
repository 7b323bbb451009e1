package freeport

import "testing"

// Ports are distinct, bindable, and outside the ephemeral range.
func TestPortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := band()
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		ps, err := Ports(4)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] || p < lo || p > hi {
				t.Fatalf("port %d: repeated or outside %d-%d", p, lo, hi)
			}
			seen[p] = true
		}
	}
}
