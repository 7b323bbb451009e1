package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// The histories of the adversarial review of the checker (2026-12): each is impossible on a
// correct etcd, or shows data lost, and an earlier checker passed it.
func TestReviewHistoriesAreViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    workload.History
	}{{
		// v1@10; an unseen indeterminate put U; CAS(expect 10) fails (so U was applied); a later
		// CAS(expect 10) succeeds: the key's mod revision went back to 10.
		name: "F1 a compare-and-swap succeeds on a mod revision the key had already left",
		h: workload.History{
			Ops: []workload.Op{put(0, "k", "v1", 0, 10, 10), indeterminate(put(1, "k", "u", 20, 30, 0)),
				cas(2, "k", "a", 10, 40, 50, 12, false), cas(3, "k", "b", 10, 60, 70, 13, true)},
			Final: final(13, "k", "b", 13),
		},
	}, {
		// The same with a create: the key is present (an unseen write), yet CAS(expect 0 =
		// absent) succeeds after a CAS(expect 0) failed.
		name: "F1b a create succeeds after one saw the key present",
		h: workload.History{
			Ops: []workload.Op{indeterminate(put(1, "k", "u", 0, 10, 0)),
				cas(2, "k", "a", 0, 40, 50, 12, false), cas(3, "k", "b", 0, 60, 70, 13, true)},
			Final: final(13, "k", "b", 13),
		},
	}, {
		// Watcher 0 stopped receiving at revision 2 (stalled after the repair); 98 acknowledged
		// writes later, the final read at 100.
		name: "F2 a watcher that stopped delivering events after revision 2",
		h: func() workload.History {
			h := workload.History{Watches: events(2, putEvent("k", "v2", 2))}
			for r := int64(2); r <= 100; r++ {
				h.Ops = append(h.Ops, put(0, "k", fmt.Sprintf("v%d", r), int(r)*10, int(r)*10+5, r))
			}
			h.Final = final(100, "k", "v100", 100)
			return h
		}(),
	}, {
		// The watcher saw 2, skipped 3 (an acknowledged write), saw 4 and 5; much later a
		// compaction at 10 cut the stream and it resumed at 10.
		name: "F3 a later compaction excuses an earlier, unrelated watch gap",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v2", 0, 5, 2), put(0, "a", "v3", 10, 15, 3), put(0, "a", "v4", 20, 25, 4),
				put(0, "a", "v5", 30, 35, 5), put(0, "a", "v10", 40, 45, 10), put(0, "a", "v11", 50, 55, 11)},
			Watches: events(2, putEvent("a", "v2", 2), putEvent("a", "v4", 4), putEvent("a", "v5", 5),
				workload.WatchEvent{Err: "mvcc: required revision has been compacted", CompactRevision: 10},
				putEvent("a", "v10", 10), putEvent("a", "v11", 11)),
			Final: final(11, "a", "v11", 11),
		},
	}, {
		// A put refused (ErrLeaseNotFound: Failed) whose value is in the final state anyway; no
		// other operation touched the key.
		name: "F8 a failed write's value in the final state (key touched only by it)",
		h: workload.History{
			Ops: []workload.Op{func() workload.Op {
				op := put(0, "lease/kept/c0/000001", "x", 0, 10, 0)
				op.Lease, op.Outcome, op.Err = 7, workload.Failed, "etcdserver: requested lease not found"
				return op
			}()},
			Leases: []workload.Lease{{ID: 7, TTL: 10, KeptAlive: true}},
			Final:  final(5, "lease/kept/c0/000001", "x", 5),
		},
	}, {
		// A key nobody wrote in the final read: from other data, e.g. a stale volume's keys.
		name: "F8b a key in the final read that no operation wrote",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2)},
			Final: final(3, "a", "v1", 2, "shared/09", "from-nowhere", 3),
		},
	}, {
		// A watch event whose value is not the write at its revision (a diverged member's).
		name: "F9 a watch event with the wrong value at an acknowledged write's revision",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2)},
			Watches: events(2, putEvent("a", "NOT-v1", 2)),
			Final:   final(2, "a", "v1", 2),
		},
	}, {
		// The write at 100 is rolled back: another client's delete gets revision 96 after it,
		// then the key is written again above 100. Each client ran one operation.
		name: "F4 revisions go back across clients (a rollback hidden by a delete and an overwrite)",
		h: workload.History{
			Ops: []workload.Op{put(0, "k", "a", 0, 10, 100), del(1, "k", 20, 30, 96), put(2, "k", "b", 40, 50, 97),
				put(3, "k", "c", 60, 70, 101)},
			Final: final(101, "k", "c", 101),
		},
	}, {
		// A stale read across clients: the put at 100 ended before the get started, whose
		// header says revision 50.
		name: "F4b a read's revision below a write that ended before it started (other client)",
		h: workload.History{
			Ops:   []workload.Op{put(0, "k1", "a", 0, 10, 100), get(1, "k2", "", 0, 20, 30, 50)},
			Final: final(100, "k1", "a", 100),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.Start = t0
			if v := CheckWithin(&tc.h, 5*time.Second); v.Result != Violated {
				t.Errorf("verdict %s, want violated", v)
			}
		})
	}
}

// F1c: v1@10 and v2@20 acknowledged, then CAS(expect 10) succeeds: a violation with or without
// an unseen indeterminate put on the key (which must not work as a wildcard).
func TestReviewStaleSwapIsCaughtDespiteAnIndeterminatePut(t *testing.T) {
	t.Parallel()
	base := []workload.Op{put(0, "k", "v1", 100, 110, 10), put(1, "k", "v2", 120, 130, 20), cas(3, "k", "b", 10, 160, 170, 21, true)}
	for _, withU := range []bool{false, true} {
		ops := append([]workload.Op{}, base...)
		if withU {
			ops = append(ops, indeterminate(put(2, "k", "u", 0, 2000, 0)))
		}
		h := workload.History{Start: t0, Ops: ops, Final: final(21, "k", "b", 21)}
		if v := CheckWithin(&h, 5*time.Second); v.Result != Violated {
			t.Errorf("with an unseen indeterminate put %v: verdict %s, want violated", withU, v)
		}
	}
}

// F6 (checker side): the total-loss drill judged at the captured revision, which stayed 0 when no
// segment was stored: every write was then "after the point" and an empty restore passed.
func TestReviewRestoredAtPointZeroIsNoPass(t *testing.T) {
	t.Parallel()
	ops := []workload.Op{put(0, "a", "v1", 0, 10, 50), put(1, "b", "w1", 5, 15, 60)}
	h := workload.History{Start: t0, End: at(40), Ops: ops, Final: final(1)}
	if v, after := CheckRestoredTo(&h, 0, 5*time.Second); v.Result == Passed {
		t.Errorf("point 0, restored cluster empty: verdict %s (%d writes after the point), want no pass", v, after)
	}
}

// F5: CheckRestoredTo compared only mod revisions with the last acknowledged writes, never the
// restored values: acks a=v1@50, b=w1@60, point 100.
func TestReviewRestoredGarbageIsAViolation(t *testing.T) {
	t.Parallel()
	ops := []workload.Op{put(0, "a", "v1", 0, 10, 50), put(1, "b", "w1", 5, 15, 60)}
	for _, f := range []*workload.Final{
		final(100, "a", "GARBAGE", 70, "b", "w1", 60),          // a value nobody wrote
		final(100, "a", "w1", 60, "b", "w1", 60),               // b's value restored into a
		final(100, "a", "v1", 99, "b", "w1", 60),               // a's value at a revision nothing wrote it at
		final(100, "a", "v1", 50, "b", "w1", 60, "z", "?", 80), // a key nobody wrote
	} {
		h := workload.History{Start: t0, End: at(40), Ops: ops, Final: f}
		if v, _ := CheckRestoredTo(&h, 100, 5*time.Second); v.Result != Violated {
			t.Errorf("restored %v: verdict %s, want violated", f.Keys, v)
		}
	}
}
