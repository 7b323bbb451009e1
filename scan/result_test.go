package scan

import (
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/guard"
)

// Which verdicts count as judged: with a live cluster given, a data dir that is UNKNOWN,
// UNREADABLE or INCOMPLETE is neither stale nor fine, so the scan must not exit 0 on it.
func TestUnjudged(t *testing.T) {
	found := func(class guard.Class, reason string) Found {
		return Found{Path: "/mnt/disks/" + strings.ToLower(string(class)), Verdict: &guard.Verdict{Class: class, Reason: reason}}
	}
	unknown := found(guard.Unknown, "no member of the live cluster answered: etcdmedic does not guess")
	for _, tc := range []struct {
		name  string
		found []Found
		want  int
		why   string
	}{
		{"no cluster given: nothing to judge", []Found{{Path: "/a"}}, 0, ""},
		{"every verdict judged", []Found{found(guard.Valid, "live"), found(guard.Removed, "removed"), found(guard.Empty, "empty"), {Path: "/b", InUse: true}}, 0, ""},
		{"the cluster not reached (incident 1's follow-up run with wrong certs)", []Found{unknown, unknown}, 2, "2 UNKNOWN (no member of the live cluster answered)"},
		{"unreadable and incomplete", []Found{found(guard.Unreadable, "whose data this is cannot be told; etcdmedic inspect it"), found(guard.Incomplete, "member/snap holds a db, but there is no member/wal")},
			2, "1 UNREADABLE (whose data this is cannot be told; etcdmedic inspect it), 1 INCOMPLETE (member/snap holds a db, but there is no member/wal)"},
		{"a stale one beside an unknown one", []Found{found(guard.Foreign, "another cluster"), unknown}, 1, "1 UNKNOWN (no member of the live cluster answered)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Found: tc.found}
			if got := r.Unjudged(); len(got) != tc.want {
				t.Errorf("Unjudged() = %q, want %d", got, tc.want)
			}
			if got := r.UnjudgedWhy(); got != tc.why {
				t.Errorf("UnjudgedWhy() = %q, want %q", got, tc.why)
			}
		})
	}
}
