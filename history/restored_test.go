package history

import (
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// A cluster lost with every disk and restored to its backup's recovery point (revision 3 here)
// after the workload stopped: what was acknowledged after the point is gone by design and
// counted; anything else the restore got wrong is named.
func TestCheckRestoredToARecoveryPoint(t *testing.T) {
	t.Parallel()
	ops := []workload.Op{put(0, "a", "v1", 0, 10, 2), put(1, "b", "w1", 5, 15, 3), put(0, "a", "v2", 20, 30, 4), del(1, "b", 25, 35, 5)}
	for _, tc := range []struct {
		name  string
		final *workload.Final
		point int64
		want  Result
		rule  Rule
		after int
	}{
		{"the state at the point: passes, with the two writes after it gone", final(3, "a", "v1", 2, "b", "w1", 3), 3, Passed, "", 2},
		{"a write before the point missing is lost", final(3, "b", "w1", 3), 3, Violated, LostWrite, 2},
		{"a restore to an older point than the store held loses a write", final(2, "a", "v1", 2), 3, Violated, LostWrite, 2},
		// Nothing captured: every write would be after the point, and an empty cluster pass.
		{"an empty restore with no recovery point is not a pass", final(1), 0, Unknown, "", 0},
		{"a restored value nobody wrote is not the history's", final(3, "a", "GARBAGE", 3, "b", "w1", 3), 3, Violated, RestoredUnwritten, 2},
		{"another key's value restored into a key is not the history's", final(3, "a", "w1", 3, "b", "w1", 3), 3, Violated, RestoredUnwritten, 2},
		{"a value at a revision that did not write it is not the history's", final(3, "a", "v1", 3, "b", "w1", 3), 3, Violated, RestoredUnwritten, 2},
		{"a restore replayed past the point is not the history's", final(4, "a", "v2", 4, "b", "w1", 3), 3, Violated, RestoredUnwritten, 2},
		{"a restored key nobody wrote is not the history's", final(3, "a", "v1", 2, "b", "w1", 3, "z", "?", 3), 3, Violated, RestoredUnwritten, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := workload.History{Start: at(0), End: at(40), Ops: ops, Final: tc.final,
				Watches: events(2, putEvent("a", "v1", 2), putEvent("b", "w1", 3), putEvent("a", "v2", 4),
					workload.WatchEvent{Type: workload.DeleteEvent, Key: "b", Revision: 5})}
			v, after := CheckRestoredTo(&h, tc.point, 10*time.Second)
			if v.Result != tc.want || (tc.rule != "" && (v.Violation == nil || v.Violation.Rule != tc.rule)) {
				t.Fatalf("verdict %s, want %s %s", v, tc.want, tc.rule)
			}
			if after != tc.after {
				t.Errorf("%d writes after the point, want %d", after, tc.after)
			}
		})
	}
	// Check itself, which knows no recovery point, calls the same restore lossy.
	h := workload.History{Start: at(0), End: at(40), Ops: ops, Final: final(3, "a", "v1", 2, "b", "w1", 3)}
	if v := Check(&h); v.Result != Violated {
		t.Fatalf("Check of a restore to an earlier point: %s, want a violation", v)
	}
}
