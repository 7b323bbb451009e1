package workload

import (
	"fmt"
	"time"
)

// Kind is what a client asked the cluster to do.
type Kind int

const (
	// Put writes Value to Key.
	Put Kind = iota + 1
	// Delete deletes Key.
	Delete
	// CompareAndSwap writes Value to Key if the key's ModRevision is still ExpectModRevision (0:
	// the key is absent), the way a Kubernetes update does.
	CompareAndSwap
	// Get is a linearizable read of Key.
	Get
)

func (k Kind) String() string {
	switch k {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case CompareAndSwap:
		return "compare-and-swap"
	case Get:
		return "get"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Outcome says whether an operation took effect, as far as its client can tell.
type Outcome int

const (
	// OK: the cluster answered; the response is known. A compare-and-swap whose comparison
	// failed is OK with Succeeded false.
	OK Outcome = iota + 1
	// Failed: the operation definitely did not take effect (refused before it was proposed).
	Failed
	// Indeterminate: timed out or lost its connection; it may or may not have taken effect.
	Indeterminate
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Indeterminate:
		return "indeterminate"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Op is one key-value operation of one client: its request, its response and when it ran.
type Op struct {
	Client int
	Kind   Kind
	Key    string
	// Value is the value written (Put, CompareAndSwap); unique per write in a workload.
	Value string
	// ExpectModRevision is a CompareAndSwap's comparison.
	ExpectModRevision int64
	// Lease is the lease the key was put with, 0 for none.
	Lease int64

	Start, End time.Time
	Outcome    Outcome
	// Err is the client's error text when Outcome is not OK.
	Err string

	// Revision is the response header's revision (OK only).
	Revision int64
	// RevisionAtLeast says Revision is only a lower bound of the response's revision: the
	// Kubernetes workload's deletes, refused updates and reads, which the apiserver answers
	// without etcd's revision. The checks that need the exact revision skip it.
	RevisionAtLeast bool
	// Succeeded is a CompareAndSwap's result.
	Succeeded bool
	// Deleted is how many keys a Delete removed.
	Deleted int64
	// Found, ReadValue and ModRevision are what a Get saw.
	Found       bool
	ReadValue   string
	ModRevision int64
}

// Wrote reports whether an OK op changed the store: a put, a successful compare-and-swap, or
// a delete that removed the key.
func (o Op) Wrote() bool {
	if o.Outcome != OK {
		return false
	}
	switch o.Kind {
	case Put:
		return true
	case CompareAndSwap:
		return o.Succeeded
	case Delete:
		return o.Deleted > 0
	}
	return false
}

func (o Op) String() string {
	s := fmt.Sprintf("client %d %s %s", o.Client, o.Kind, o.Key)
	switch o.Kind {
	case Put:
		s += fmt.Sprintf(" = %q", o.Value)
	case CompareAndSwap:
		s += fmt.Sprintf(" = %q if mod_revision == %d", o.Value, o.ExpectModRevision)
	}
	if o.Lease != 0 {
		s += fmt.Sprintf(" (lease %x)", o.Lease)
	}
	s += " -> " + o.Outcome.String()
	switch {
	case o.Outcome != OK:
		s += ": " + o.Err
	case o.Kind == Get && o.Found:
		s += fmt.Sprintf(" %q mod_revision %d at revision %d", o.ReadValue, o.ModRevision, o.Revision)
	case o.Kind == Get:
		s += fmt.Sprintf(" absent at revision %d", o.Revision)
	case o.Kind == CompareAndSwap:
		s += fmt.Sprintf(" succeeded=%v at revision %d", o.Succeeded, o.Revision)
	case o.Kind == Delete:
		s += fmt.Sprintf(" deleted %d at revision %d", o.Deleted, o.Revision)
	default:
		s += fmt.Sprintf(" at revision %d", o.Revision)
	}
	return s
}

// EventType is a watch event's type.
type EventType int

const (
	// PutEvent: a key was written.
	PutEvent EventType = iota + 1
	// DeleteEvent: a key was deleted (by a client or its lease's expiry).
	DeleteEvent
)

func (e EventType) String() string {
	if e == DeleteEvent {
		return "DELETE"
	}
	return "PUT"
}

// WatchEvent is one event a watcher received, or one error that ended a watch stream.
type WatchEvent struct {
	At       time.Time
	Type     EventType
	Key      string
	Value    string
	Revision int64
	// Err is set for an error or cancellation; the watcher then resumes from the last revision
	// it saw plus one (or the compaction revision). Type, Key and Value are then empty.
	Err string
	// CompactRevision is set when the error is a compaction: events before it are gone.
	CompactRevision int64
}

// Watch is everything one watcher of the workload's prefix received, in order.
type Watch struct {
	// StartRevision is the revision the first watch started from.
	StartRevision int64
	Events        []WatchEvent
	// Through is the newest revision the watcher had received everything of when it was
	// stopped: its last event, or a progress notification's revision (nothing in the prefix
	// between them was left to deliver). Stop lets the watchers catch up with the last
	// acknowledged write first, so a watcher short of it stalled. 0 when none was recorded.
	Through int64
}

// Lease is one lease of a client: granted, and kept alive or left to expire.
type Lease struct {
	Client int
	ID     int64
	TTL    int64
	// KeptAlive says the client kept the lease alive until the workload stopped: its keys must
	// not disappear unless deleted.
	KeptAlive bool
	// LostAt is when the keep-alive stream ended early (zero if it never did).
	LostAt time.Time
}

// Final is one read of the whole prefix at one revision, after the workload stopped.
type Final struct {
	At       time.Time
	Revision int64
	// Keys maps each key present to its value and mod revision.
	Keys map[string]KeyValue
}

// KeyValue is a key's value and the revision that last wrote it.
type KeyValue struct {
	Value       string
	ModRevision int64
}

// History is everything a workload did and saw.
type History struct {
	Prefix     string
	Start, End time.Time
	// Ops holds every client's key-value operations, in the order each ended.
	Ops     []Op
	Watches []Watch
	Leases  []Lease
	// Final is the read of the prefix after the workload stopped; nil until ReadFinal.
	Final *Final
}

// Counts returns how many operations ended with each outcome, per kind.
func (h *History) Counts() map[Kind]map[Outcome]int {
	c := map[Kind]map[Outcome]int{}
	for _, op := range h.Ops {
		if c[op.Kind] == nil {
			c[op.Kind] = map[Outcome]int{}
		}
		c[op.Kind][op.Outcome]++
	}
	return c
}

// Summary is one line: operations per second and the count of each outcome per kind.
func (h *History) Summary() string {
	d := h.End.Sub(h.Start)
	counts := h.Counts()
	acked := 0
	s := ""
	for _, k := range []Kind{Put, Delete, CompareAndSwap, Get} {
		c := counts[k]
		acked += c[OK]
		s += fmt.Sprintf("; %s %d ok %d failed %d indeterminate (%.0f/s)", k, c[OK], c[Failed], c[Indeterminate], float64(c[OK])/d.Seconds())
	}
	events := 0
	for _, w := range h.Watches {
		events += len(w.Events)
	}
	return fmt.Sprintf("%d ops acknowledged in %s (%.0f/s)%s; %d watch events over %d watchers; %d leases",
		acked, d.Round(time.Millisecond), float64(acked)/d.Seconds(), s, events, len(h.Watches), len(h.Leases))
}
