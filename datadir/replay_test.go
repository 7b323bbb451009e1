package datadir

import "testing"

// How far the v2 store is replayed: etcd's max(HardState.Commit, consistent index), never past
// the last entry in the WAL.
func TestV2ReplayBound(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		commit, ci, last, want uint64
		bound                  string
	}{
		{"a clean stop: commit synced, the backend behind it", 40, 38, 40, 40, "hardState.commit"},
		{"killed after a commit-only HardState (not fsynced): the backend applied past it", 3, 8, 9, 8, "consistent index"},
		{"no backend read (consistent index 0)", 12, 0, 12, 12, "hardState.commit"},
		{"a backend from a newer snapshot than the WAL holds", 5, 20, 9, 9, "last index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, bound := v2ReplayBound(tc.commit, tc.ci, tc.last)
			if to != tc.want || bound != tc.bound {
				t.Errorf("v2ReplayBound(%d, %d, %d) = %d %q, want %d %q", tc.commit, tc.ci, tc.last, to, bound, tc.want, tc.bound)
			}
		})
	}
}
