package upgrade

import "testing"

// When the check after a hop must find every member's v3 records agreeing with raft: before a
// hop to another minor version, and at the end of an upgrade; not between two hops of one minor
// version, nor at the end of a v3.5 patch upgrade (its drift is the next plan's, to v3.6, to
// route around).
func TestDriftMattersBeforeAnotherMinorVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		hops     []string
		hop      int
		matters  bool
	}{
		{"incident 3's path: after the first v3.5.24 pass, the full restart still to come", "v3.5.19", "v3.6.16", []string{"v3.5.24", "v3.5.24", "v3.6.16"}, 0, false},
		{"incident 3's path: after the full restart, before v3.6", "v3.5.19", "v3.6.16", []string{"v3.5.24", "v3.5.24", "v3.6.16"}, 1, true},
		{"incident 3's path: on v3.6 at the end", "v3.5.19", "v3.6.16", []string{"v3.5.24", "v3.5.24", "v3.6.16"}, 2, true},
		{"a v3.5 patch upgrade from before the fix: done, its drift left to the plan to v3.6", "v3.5.15", "v3.5.24", []string{"v3.5.24"}, 0, false},
		{"a v3.6 patch upgrade: its v3 records are the membership", "v3.6.4", "v3.6.16", []string{"v3.6.16"}, 0, true},
		{"a downgrade to v3.5", "v3.6.16", "v3.5.24", []string{"v3.5.24"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{From: tc.from, Target: tc.to}
			for _, v := range tc.hops {
				p.Hops = append(p.Hops, Hop{Version: v})
			}
			if got := driftMatters(p, tc.hop); got != tc.matters {
				t.Fatalf("after hop %d of %v: drift matters %v, want %v", tc.hop+1, tc.hops, got, tc.matters)
			}
		})
	}
}
