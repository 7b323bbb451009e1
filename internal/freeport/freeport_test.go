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

// A port claimed by one process (here: by this one, the kernel makes no difference) cannot be
// claimed again until it is released; the next test binary of a run then skips it.
func TestAClaimedPortIsNotClaimedTwice(t *testing.T) {
	lo, _ := band()
	p := lo + 7
	_, release, ok := claim(p)
	if !ok {
		t.Skipf("port %d is claimed by another process of this machine", p)
	}
	if _, _, again := claim(p); again && runtimeHasAbstractSockets {
		t.Fatalf("port %d claimed twice", p)
	}
	release()
	_, release, ok = claim(p)
	if !ok {
		t.Fatalf("port %d not claimable after its release", p)
	}
	release()
}
