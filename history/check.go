// Package history judges a workload's whole client history: is it linearizable, was any
// acknowledged write lost or delete undone, did a client see revisions go back, did a watcher
// miss or repeat an event, did a kept-alive lease's key vanish. Check returns one verdict with
// the first violation, the way etcd's robustness tests and Jepsen judge a cluster.
package history

import (
	"fmt"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// Rule names what a violation broke.
type Rule string

const (
	// LostWrite: an acknowledged write is not in the final state, which is older than it.
	LostWrite Rule = "acknowledged write lost"
	// DeleteUndone: an acknowledged delete's key is back with a value older than the delete.
	DeleteUndone Rule = "acknowledged delete undone"
	// LeaseKeyVanished: a key put with a lease kept alive to the end is gone.
	LeaseKeyVanished Rule = "lease-attached key vanished while its lease was kept alive"
	// RevisionWentBack: a client saw a lower revision after a higher one.
	RevisionWentBack Rule = "revision went backwards"
	// WatchGap: a watcher skipped the event of an acknowledged write it had watched past.
	WatchGap Rule = "watch gap"
	// WatchDuplicate: a watcher received an event again, or out of revision order.
	WatchDuplicate Rule = "watch duplicate"
	// WatchEventWrong: a watch event is not the write at its revision (key, type or value), or
	// a write no operation made.
	WatchEventWrong Rule = "watch event not the history's write"
	// WatchStalled: a watcher had not received the last acknowledged write's revision when
	// it was stopped, after the workload let it catch up.
	WatchStalled Rule = "watch stalled"
	// RestoredUnwritten: a restored key's value and mod revision are no write of the history
	// for that key at that revision, up to the recovery point.
	RestoredUnwritten Rule = "restored state not written"
	// RefusedWriteApplied: the value of a write etcd refused before proposing it (Failed) was
	// read, watched or in the final state.
	RefusedWriteApplied Rule = "refused write applied"
	// NotLinearizable: no order of the key's operations explains what the clients saw.
	NotLinearizable Rule = "not linearizable"
)

// Violation is the first thing found wrong: the rule, the operation, and what a correct
// cluster would have shown next to what this one showed.
type Violation struct {
	Rule      Rule
	Operation string
	Expected  string
	Seen      string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s; expected %s; seen %s", v.Rule, v.Operation, v.Expected, v.Seen)
}

// Result is a verdict's answer.
type Result int

const (
	// Passed: every check held.
	Passed Result = iota + 1
	// Violated: a check found a violation.
	Violated
	// Unknown: no violation found, but a check could not finish (the linearizability search
	// ran out of time, or there was no final read); not a pass.
	Unknown
)

func (r Result) String() string {
	switch r {
	case Passed:
		return "passed"
	case Violated:
		return "violated"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("result(%d)", int(r))
}

// Verdict is the checker's one answer about a history.
type Verdict struct {
	Result Result
	// Violation is the first violation (Violated only).
	Violation *Violation
	// Why says what could not be checked (Unknown only).
	Why string
}

func (v Verdict) String() string {
	switch v.Result {
	case Violated:
		return "violated: " + v.Violation.String()
	case Unknown:
		return "unknown: " + v.Why
	}
	return v.Result.String()
}

// DefaultTimeout bounds Check's linearizability search.
const DefaultTimeout = 30 * time.Second

// Check checks h with DefaultTimeout for the linearizability search.
func Check(h *workload.History) Verdict {
	return CheckWithin(h, DefaultTimeout)
}

// CheckWithin checks h: the final state against acknowledged writes, deletes and lease keys,
// each client's revisions, each watcher's events and that it reached the last acknowledged
// write, then linearizability (bounded by timeout).
// The cheap, precise checks run first, so a lost write is named as such.
func CheckWithin(h *workload.History, timeout time.Duration) Verdict {
	if h.Final == nil {
		if v := first(refusedWritesSeen(h), clientRevisions(h), realTimeRevisions(h), watchEvents(h), watchStalls(h)); v != nil {
			return Verdict{Result: Violated, Violation: v}
		}
		return Verdict{Result: Unknown, Why: "no final read: acknowledged writes cannot be checked"}
	}
	if v := first(finalState(h), refusedWritesSeen(h), clientRevisions(h), realTimeRevisions(h), watchEvents(h), watchStalls(h)); v != nil {
		return Verdict{Result: Violated, Violation: v}
	}
	return linearizable(h, timeout)
}

func first(found ...[]Violation) *Violation {
	for _, vs := range found {
		if len(vs) > 0 {
			return &vs[0]
		}
	}
	return nil
}
