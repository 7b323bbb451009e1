package recovery

import (
	"errors"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"
)

// What apply finds in the other members' data dirs just before the survivor changes, against
// what the plan read: each row a situation between plan and apply.
func TestStaleHistoryRefusesALogThatMovedSinceThePlan(t *testing.T) {
	planned := &Assessment{Survivor: "m1", Candidates: []Candidate{
		logOf("m1", 5, 120, 120, 120), logOf("m2", 5, 118, 117, 117), {Name: "m3", Wiped: true},
	}}
	moved := func(c Candidate, f func(*Candidate)) Candidate { f(&c); return c }
	m2 := logOf("m2", 5, 118, 117, 117)
	for _, tc := range []struct {
		name string
		now  []Candidate
		want string // "" accepted; else a phrase of the refusal
	}{
		{"nothing moved", []Candidate{m2, {Name: "m3", Wiped: true}}, ""},
		{"m2 and m3 came back, committed and lost quorum again: m2 is ahead of the survivor",
			[]Candidate{logOf("m2", 6, 140, 140, 140), {Name: "m3", Wiped: true}}, "m2 now holds a newer or longer log than the plan's survivor m1"},
		{"a newer term with a shorter log still outranks the survivor (raft's rule)",
			[]Candidate{logOf("m2", 6, 110, 110, 110)}, "m2 now holds a newer or longer log"},
		{"m2 took entries yet stays behind the survivor: the cluster ran, refused all the same",
			[]Candidate{logOf("m2", 5, 119, 119, 119)}, "m2's log is not the one the plan read"},
		{"only m2's commit index moved", []Candidate{moved(m2, func(c *Candidate) { c.Commit = 118 })}, "commit 117 when planned"},
		{"the wiped m3 rejoined the old cluster and holds a log now",
			[]Candidate{m2, logOf("m3", 6, 130, 130, 130)}, "m3 now holds a newer or longer log"},
		{"m2 runs again", []Candidate{{Name: "m2", Running: true}}, "runs on its data dir again"},
		{"m2's data dir now holds another member's data",
			[]Candidate{moved(m2, func(c *Candidate) { c.MemberID = 0x999 })}, "now member"},
		{"an applied index that caught up at a restart is not a change", []Candidate{moved(m2, func(c *Candidate) { c.ConsistentIndex = 118; c.Term = 7 })}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := map[string]Candidate{}
			for _, c := range tc.now {
				now[c.Name] = c
			}
			err := staleHistory(planned, now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "make a new plan")):
				t.Fatalf("got %v, want ErrStale saying %q and to make a new plan", err, tc.want)
			}
		})
	}
}

// A survivor found serving at the force step: the one-member cluster an earlier run made
// (perhaps with leftovers of the forced start), or the old cluster back with quorum.
func TestNotAloneTellsAForcedSurvivorFromTheOldCluster(t *testing.T) {
	known := map[etcdmedic.ID]bool{1: true, 2: true, 3: true}
	stopped := []MemberState{{Name: "m2", State: StateStopped}, {Name: "m3", State: StateStopped}}
	for _, tc := range []struct {
		name   string
		listed []etcdmedic.Member
		others []MemberState
		want   string
	}{
		{"alone", []etcdmedic.Member{{ID: 1, Name: "m1"}}, stopped, ""},
		{"leftovers of the forced start (etcd #20055, #20896), stopped: remove-leftovers removes them",
			[]etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 2, Name: "m2"}, {ID: 3, IsLearner: true}}, stopped, ""},
		{"the old cluster restarted by an unknown supervisor: the others serve",
			[]etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 2, Name: "m2"}, {ID: 3, Name: "m3"}},
			[]MemberState{{Name: "m2", State: StateServing}, {Name: "m3", State: StateServing}}, "m2 is serving"},
		{"another member cannot be shown down", []etcdmedic.Member{{ID: 1, Name: "m1"}},
			[]MemberState{{Name: "m2", State: StateStopped}, {Name: "m3", State: StateUnknown, Evidence: "timeout"}}, "m3 is unknown"},
		{"a member the plan does not know was added", []etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 9, Name: "m9"}}, stopped, "m9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := notAlone(1, tc.listed, known, tc.others)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
