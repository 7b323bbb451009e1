package history

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// at is a time t0 + ms milliseconds, so hand-built histories read as timelines.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func put(client int, key, value string, from, to int, rev int64) workload.Op {
	return workload.Op{Client: client, Kind: workload.Put, Key: key, Value: value, Start: at(from), End: at(to), Outcome: workload.OK, Revision: rev}
}

func del(client int, key string, from, to int, rev int64) workload.Op {
	return workload.Op{Client: client, Kind: workload.Delete, Key: key, Start: at(from), End: at(to), Outcome: workload.OK, Revision: rev, Deleted: 1}
}

func get(client int, key, value string, modRev int64, from, to int, rev int64) workload.Op {
	return workload.Op{Client: client, Kind: workload.Get, Key: key, Start: at(from), End: at(to), Outcome: workload.OK,
		Revision: rev, Found: value != "", ReadValue: value, ModRevision: modRev}
}

func cas(client int, key, value string, expect int64, from, to int, rev int64, ok bool) workload.Op {
	return workload.Op{Client: client, Kind: workload.CompareAndSwap, Key: key, Value: value, ExpectModRevision: expect,
		Start: at(from), End: at(to), Outcome: workload.OK, Revision: rev, Succeeded: ok}
}

func indeterminate(op workload.Op) workload.Op {
	op.Outcome, op.Err, op.Revision, op.Deleted = workload.Indeterminate, "context deadline exceeded", 0, 0
	return op
}

func final(rev int64, kvs ...any) *workload.Final {
	f := &workload.Final{At: at(1000), Revision: rev, Keys: map[string]workload.KeyValue{}}
	for i := 0; i < len(kvs); i += 3 {
		f.Keys[kvs[i].(string)] = workload.KeyValue{Value: kvs[i+1].(string), ModRevision: int64(kvs[i+2].(int))}
	}
	return f
}

func events(start int64, evs ...workload.WatchEvent) []workload.Watch {
	return []workload.Watch{{StartRevision: start, Events: evs}}
}

func putEvent(key, value string, rev int64) workload.WatchEvent {
	return workload.WatchEvent{Type: workload.PutEvent, Key: key, Value: value, Revision: rev}
}

// Each row is a situation a repair can leave behind, built by hand: the checker must pass the
// clean ones and name what broke in the others.
func TestCheckNamesTheFirstViolation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    workload.History
		want Result
		rule Rule
	}{{
		name: "a clean history passes",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2), get(1, "a", "v1", 2, 20, 30, 2), put(1, "a", "v2", 40, 50, 3)},
			Watches: events(2, putEvent("a", "v1", 2), putEvent("a", "v2", 3)),
			Final:   final(3, "a", "v2", 3),
		},
		want: Passed,
	}, {
		name: "an acknowledged write missing from the final state is lost",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 5)},
			Final: final(3, "a", "v1", 2),
		},
		want: Violated, rule: LostWrite,
	}, {
		name: "an acknowledged delete whose key came back with its old value is undone",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2), del(1, "a", 20, 30, 3)},
			Final: final(3, "a", "v1", 2),
		},
		want: Violated, rule: DeleteUndone,
	}, {
		name: "a read of an overwritten value after the overwrite ended is stale",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3), get(1, "a", "v1", 2, 40, 50, 3)},
			Final: final(3, "a", "v2", 3),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "a client that sees a lower revision after a higher one went backwards",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 5), get(0, "b", "", 0, 20, 30, 4)},
			Final: final(5, "a", "v1", 5),
		},
		want: Violated, rule: RevisionWentBack,
	}, {
		name: "a delete after another client's write ended, at a lower revision, went backwards",
		h: workload.History{
			Ops: []workload.Op{put(0, "k", "a", 0, 10, 100), del(1, "k", 20, 30, 96), put(2, "k", "b", 40, 50, 97),
				put(3, "k", "c", 60, 70, 101)},
			Final: final(101, "k", "c", 101),
		},
		want: Violated, rule: RevisionWentBack,
	}, {
		name: "a read of another key below a write that ended before it started went backwards",
		h: workload.History{
			Ops:   []workload.Op{put(0, "k1", "a", 0, 10, 100), get(1, "k2", "", 0, 20, 30, 50)},
			Final: final(100, "k1", "a", 100),
		},
		want: Violated, rule: RevisionWentBack,
	}, {
		name: "overlapping operations of two clients, and a lower bound below, pass",
		h: workload.History{
			Ops: []workload.Op{put(0, "k1", "a", 0, 10, 5), put(1, "k2", "b", 5, 15, 4),
				func() workload.Op { op := get(2, "k1", "a", 5, 20, 30, 4); op.RevisionAtLeast = true; return op }()},
			Final: final(5, "k1", "a", 5, "k2", "b", 4),
		},
		want: Passed,
	}, {
		name: "a delete at a revision below the key's last write is not linearizable",
		h: workload.History{
			Ops:   []workload.Op{put(0, "k", "a", 0, 50, 100), del(1, "k", 10, 60, 96), put(0, "k", "b", 70, 80, 101)},
			Final: final(101, "k", "b", 101),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "a watcher that skipped an acknowledged write's revision has a gap",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3), put(0, "a", "v3", 40, 50, 4)},
			Watches: events(2, putEvent("a", "v1", 2), putEvent("a", "v3", 4)),
			Final:   final(4, "a", "v3", 4),
		},
		want: Violated, rule: WatchGap,
	}, {
		name: "a watcher that got an event twice across a resume has a duplicate",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3)},
			Watches: events(2, putEvent("a", "v1", 2), workload.WatchEvent{Err: "etcdserver: no leader"},
				putEvent("a", "v1", 2), putEvent("a", "v2", 3)),
			Final: final(3, "a", "v2", 3),
		},
		want: Violated, rule: WatchDuplicate,
	}, {
		name: "a watcher compacted past a revision and resumed cleanly passes",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3), put(0, "a", "v3", 40, 50, 4)},
			Watches: events(2, putEvent("a", "v1", 2), workload.WatchEvent{Err: "mvcc: required revision has been compacted", CompactRevision: 4},
				putEvent("a", "v3", 4)),
			Final: final(4, "a", "v3", 4),
		},
		want: Passed,
	}, {
		name: "a compaction excuses only the revisions it removed: an earlier skipped write is a gap",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v2", 0, 5, 2), put(0, "a", "v3", 10, 15, 3), put(0, "a", "v4", 20, 25, 4),
				put(0, "a", "v5", 30, 35, 5), put(0, "a", "v10", 40, 45, 10)},
			Watches: events(2, putEvent("a", "v2", 2), putEvent("a", "v4", 4), putEvent("a", "v5", 5),
				workload.WatchEvent{Err: "mvcc: required revision has been compacted", CompactRevision: 10}, putEvent("a", "v10", 10)),
			Final: final(10, "a", "v10", 10),
		},
		want: Violated, rule: WatchGap,
	}, {
		name: "a watch event with another value than the acknowledged write at its revision is wrong",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2)},
			Watches: events(2, putEvent("a", "NOT-v1", 2)),
			Final:   final(2, "a", "v1", 2),
		},
		want: Violated, rule: WatchEventWrong,
	}, {
		name: "a watch event of a write no operation made is wrong",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 4)},
			Watches: events(2, putEvent("a", "v1", 2), putEvent("b", "phantom", 3), putEvent("a", "v2", 4)),
			Final:   final(4, "a", "v2", 4),
		},
		want: Violated, rule: WatchEventWrong,
	}, {
		name: "the deletes of one lease's keys at one revision, and an indeterminate put's event, pass",
		h: workload.History{
			Ops: []workload.Op{
				func() workload.Op { op := put(0, "l1", "x1", 0, 10, 2); op.Lease = 7; return op }(),
				func() workload.Op { op := put(0, "l2", "x2", 20, 30, 3); op.Lease = 7; return op }(),
				indeterminate(put(1, "a", "u", 40, 900, 0)), put(0, "b", "w", 500, 510, 6)},
			Leases: []workload.Lease{{ID: 7, TTL: 3}},
			Watches: events(2, putEvent("l1", "x1", 2), putEvent("l2", "x2", 3), putEvent("a", "u", 4),
				workload.WatchEvent{Type: workload.DeleteEvent, Key: "l1", Revision: 5}, workload.WatchEvent{Type: workload.DeleteEvent, Key: "l2", Revision: 5},
				putEvent("b", "w", 6)),
			Final: final(6, "a", "u", 4, "b", "w", 6),
		},
		want: Passed,
	}, {
		// Review of F7: the lease (TTL 10 s) kept alive until its stream broke at 30 s could not
		// expire before 20 s; a watcher saw its key deleted at 5 s.
		name: "a lease key's delete event before its lease could expire: the key vanished",
		h:    leaseKeyDeletedAt(5000, &workload.Lease{ID: 7, TTL: 10, LostAt: at(30_000)}),
		want: Violated, rule: LeaseKeyVanished,
	}, {
		name: "a lease key's delete event once its lease could have expired passes",
		h:    leaseKeyDeletedAt(21_000, &workload.Lease{ID: 7, TTL: 10, LostAt: at(30_000)}),
		want: Passed,
	}, {
		name: "a delete event of a key whose lease was kept alive to the end: the key vanished",
		h:    leaseKeyDeletedAt(21_000, &workload.Lease{ID: 7, TTL: 10, KeptAlive: true}),
		want: Violated, rule: LeaseKeyVanished,
	}, {
		// Review: a log entry re-applied after a bad repair (the consistent index rolled back):
		// one timed-out write seen by two watchers at two revisions.
		name: "a timed-out write applied twice, at two revisions, is not the history's",
		h: workload.History{
			Ops: []workload.Op{put(0, "k", "v1", 0, 10, 2), indeterminate(put(1, "k", "u", 20, 2000, 0)), put(2, "b", "w", 30, 40, 4)},
			Watches: []workload.Watch{
				{StartRevision: 2, Through: 5, Events: []workload.WatchEvent{putEvent("k", "v1", 2), putEvent("k", "u", 3), putEvent("b", "w", 4)}},
				{StartRevision: 4, Through: 5, Events: []workload.WatchEvent{putEvent("b", "w", 4), putEvent("k", "u", 5)}},
			},
			Final: final(5, "k", "u", 5, "b", "w", 4),
		},
		want: Violated, rule: WatchEventWrong,
	}, {
		name: "a watcher that stopped receiving events after revision 2 stalled",
		h: workload.History{
			Ops:     []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3), put(0, "a", "v3", 40, 50, 4)},
			Watches: events(2, putEvent("a", "v1", 2)),
			Final:   final(4, "a", "v3", 4),
		},
		want: Violated, rule: WatchStalled,
	}, {
		name: "a watcher compacted past the last write that resumed and got a progress notification passes",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3), put(0, "a", "v3", 40, 50, 4)},
			Watches: []workload.Watch{{StartRevision: 2, Through: 6, Events: []workload.WatchEvent{putEvent("a", "v1", 2),
				{Err: "mvcc: required revision has been compacted", CompactRevision: 5}}}},
			Final: final(4, "a", "v3", 4),
		},
		want: Passed,
	}, {
		name: "a key put with a lease kept alive to the end must still be there",
		h: workload.History{
			Ops:    []workload.Op{func() workload.Op { op := put(0, "l", "v1", 0, 10, 2); op.Lease = 7; return op }()},
			Leases: []workload.Lease{{ID: 7, TTL: 10, KeptAlive: true}},
			Final:  final(2),
		},
		want: Violated, rule: LeaseKeyVanished,
	}, {
		name: "a key put with a lease kept alive until the workload stopped may be gone a TTL later",
		h: workload.History{
			Start:  at(0),
			End:    at(100),
			Ops:    []workload.Op{func() workload.Op { op := put(0, "l", "v1", 0, 10, 2); op.Lease = 7; return op }()},
			Leases: []workload.Lease{{ID: 7, TTL: 10, KeptAlive: true}},
			Final:  func() *workload.Final { f := final(2); f.At = at(100 + 10_000); return f }(),
		},
		want: Passed,
	}, {
		name: "a key gone a TTL before its kept-alive lease's stream broke vanished",
		h: workload.History{
			Ops: []workload.Op{func() workload.Op { op := put(0, "l", "v1", 0, 10, 2); op.Lease = 7; return op }(),
				get(1, "l", "", 0, 100, 110, 3)},
			Leases: []workload.Lease{{ID: 7, TTL: 10, LostAt: at(10_500)}},
			Final:  func() *workload.Final { f := final(3); f.At = at(20_000); return f }(),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "a key gone after a TTL before its kept-alive lease's stream broke may have expired",
		h: workload.History{
			Ops: []workload.Op{func() workload.Op { op := put(0, "l", "v1", 0, 10, 2); op.Lease = 7; return op }(),
				get(1, "l", "", 0, 600, 610, 3)},
			Leases: []workload.Lease{{ID: 7, TTL: 10, LostAt: at(10_500)}},
			Final:  func() *workload.Final { f := final(3); f.At = at(20_000); return f }(),
		},
		want: Passed,
	}, {
		name: "a key put with a lease left to expire may be gone",
		h: workload.History{
			Ops:    []workload.Op{func() workload.Op { op := put(0, "l", "v1", 0, 10, 2); op.Lease = 7; return op }()},
			Leases: []workload.Lease{{ID: 7, TTL: 3}},
			Final:  final(3),
		},
		want: Passed,
	}, {
		name: "an indeterminate put a later read saw took effect",
		h: workload.History{
			Ops:   []workload.Op{indeterminate(put(0, "a", "v1", 0, 2000, 0)), get(1, "a", "v1", 2, 2100, 2110, 2)},
			Final: final(2, "a", "v1", 2),
		},
		want: Passed,
	}, {
		name: "an indeterminate put nobody saw may never have happened",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2), indeterminate(put(1, "a", "v2", 20, 2020, 0)), get(0, "a", "v1", 2, 2100, 2110, 2)},
			Final: final(2, "a", "v1", 2),
		},
		want: Passed,
	}, {
		name: "a compare-and-swap that succeeded on a revision the key no longer had is not linearizable",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2), put(0, "a", "v2", 20, 30, 3),
				{Client: 1, Kind: workload.CompareAndSwap, Key: "a", Value: "v3", ExpectModRevision: 2, Start: at(40), End: at(50), Outcome: workload.OK, Revision: 4, Succeeded: true}},
			Final: final(4, "a", "v3", 4),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "a compare-and-swap on a revision an unseen indeterminate put had replaced is not linearizable",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 100, 110, 10), put(1, "a", "v2", 120, 130, 20),
				cas(3, "a", "v3", 10, 160, 170, 21, true), indeterminate(put(2, "a", "u", 0, 2000, 0))},
			Final: final(21, "a", "v3", 21),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "an unseen indeterminate put, a compare-and-swap it made fail and a later put pass",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 10), indeterminate(put(1, "a", "u", 20, 2020, 0)),
				cas(2, "a", "v2", 10, 30, 40, 12, false), indeterminate(cas(3, "a", "v3", 10, 50, 2050, 0, false)),
				put(2, "a", "v4", 60, 70, 13)},
			Final: final(13, "a", "v4", 13),
		},
		want: Passed,
	}, {
		name: "a put refused before proposal whose value is in the final state was applied",
		h: workload.History{
			Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2), func() workload.Op {
				op := put(1, "a", "v2", 20, 30, 0)
				op.Outcome, op.Err = workload.Failed, "etcdserver: requested lease not found"
				return op
			}()},
			Final: final(3, "a", "v2", 3),
		},
		want: Violated, rule: RefusedWriteApplied,
	}, {
		name: "a key in the final read that no operation wrote is not linearizable",
		h: workload.History{
			Ops:   []workload.Op{put(0, "a", "v1", 0, 10, 2)},
			Final: final(3, "a", "v1", 2, "shared/09", "from-nowhere", 3),
		},
		want: Violated, rule: NotLinearizable,
	}, {
		name: "without a final read the verdict is unknown, not passed",
		h:    workload.History{Ops: []workload.Op{put(0, "a", "v1", 0, 10, 2)}},
		want: Unknown,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.Start = t0
			v := CheckWithin(&tc.h, 5*time.Second)
			if v.Result != tc.want {
				t.Fatalf("verdict %s, want %s", v, tc.want)
			}
			if tc.want == Violated && v.Violation.Rule != tc.rule {
				t.Fatalf("verdict %s, want rule %q", v, tc.rule)
			}
			if tc.want == Violated && (v.Violation.Operation == "" || v.Violation.Expected == "" || v.Violation.Seen == "") {
				t.Fatalf("violation without operation, expected or seen: %s", v)
			}
			if !strings.Contains(v.String(), tc.want.String()) {
				t.Errorf("verdict text %q does not say %s", v, tc.want)
			}
		})
	}
}

// leaseKeyDeletedAt is a lease key put at 0 ms whose delete event a watcher receives at ms
// (revision 3, no operation deleting it), then another key's write: only the lease's expiry
// can explain the delete.
func leaseKeyDeletedAt(ms int, lease *workload.Lease) workload.History {
	lk := "lease/kept/c0/000001"
	return workload.History{Start: t0, End: at(35_000),
		Ops: []workload.Op{func() workload.Op { op := put(0, lk, "x", 0, 10, 2); op.Lease = lease.ID; return op }(),
			put(1, "a", "v", 30_000, 30_010, 4)},
		Leases: []workload.Lease{*lease},
		Watches: []workload.Watch{{StartRevision: 2, Through: 4, Events: []workload.WatchEvent{
			{At: at(10), Type: workload.PutEvent, Key: lk, Value: "x", Revision: 2},
			{At: at(ms), Type: workload.DeleteEvent, Key: lk, Revision: 3},
			{At: at(30_005), Type: workload.PutEvent, Key: "a", Value: "v", Revision: 4}}}},
		Final: func() *workload.Final { f := final(4, "a", "v", 4); f.At = at(40_000); return f }(),
	}
}
