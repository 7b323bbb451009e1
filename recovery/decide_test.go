package recovery

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"
)

// logOf is a candidate's raft log as recover reads it offline: the term of its last entry, its
// last index, its HardState commit and the index its backend applied.
func logOf(name string, lastTerm, lastIndex, commit, consistent uint64) Candidate {
	return Candidate{Name: name, ClusterID: 0xc1, MemberID: memberID(name), LastTerm: lastTerm, LastIndex: lastIndex,
		Commit: commit, ConsistentIndex: consistent, Revision: int64(lastIndex)}
}

func memberID(name string) etcdmedic.ID { return etcdmedic.ID(0x100 + int(name[len(name)-1]-'0')) }

func rejected(c Candidate, why string) Candidate {
	c.Rejected = why
	return c
}

func names(cs []Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, " ")
}

// Which member survives a quorum loss: raft's election rule (the newest last term, then the
// longest log), then what each knows committed. Each row is a situation of incident 2.
func TestRankFollowsRaftsElectionRule(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []Candidate
		want       string
	}{
		{"the member that dropped out first is behind",
			[]Candidate{logOf("m1", 5, 90, 90, 90), logOf("m2", 5, 120, 118, 118), logOf("m3", 5, 119, 118, 118)}, "m2 m3 m1"},
		{"a longer log of an older term loses to a newer term (raft would elect the newer)",
			[]Candidate{logOf("m1", 4, 150, 150, 150), logOf("m2", 5, 120, 120, 120)}, "m2 m1"},
		{"equal logs: the one that knows more committed first",
			[]Candidate{logOf("m1", 5, 120, 100, 100), logOf("m2", 5, 120, 110, 0)}, "m2 m1"},
		{"HardState not synced: the backend's consistent index counts as committed",
			[]Candidate{logOf("m1", 5, 120, 50, 115), logOf("m2", 5, 120, 110, 0)}, "m1 m2"},
		{"a log shorter than the backend applied is kept to the applied index",
			[]Candidate{logOf("m1", 5, 100, 100, 130), logOf("m2", 5, 120, 120, 120)}, "m1 m2"},
		{"a rejected data dir never ranks, however far along",
			[]Candidate{rejected(logOf("m1", 9, 999, 999, 999), "torn pages in its db"), logOf("m2", 5, 120, 120, 120)}, "m2"},
		{"a wiped member has nothing to offer",
			[]Candidate{rejected(Candidate{Name: "m1", Wiped: true}, "its data dir does not exist (wiped)"), logOf("m2", 5, 1, 1, 1)}, "m2"},
		{"a tie keeps the order the operator gave",
			[]Candidate{logOf("m2", 5, 120, 120, 120), logOf("m1", 5, 120, 120, 120)}, "m2 m1"},
		{"nothing usable", []Candidate{rejected(logOf("m1", 5, 1, 1, 1), "another cluster")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(rank(tc.candidates)); got != tc.want {
				t.Errorf("ranked %q, want %q", got, tc.want)
			}
		})
	}
}

// threeMembers is the survivor-to-be's view of a three-member cluster, m3 removed at index 80.
func threeMembers(cs ...Candidate) *Assessment {
	ms := []etcdmedic.Member{
		{ID: memberID("m1"), Name: "m1", PeerURLs: []string{"http://127.0.0.1:2381"}},
		{ID: memberID("m2"), Name: "m2", PeerURLs: []string{"http://127.0.0.1:2382"}},
		{ID: memberID("m4"), Name: "m4", PeerURLs: []string{"http://127.0.0.1:2384"}, IsLearner: true},
	}
	for i := range cs {
		cs[i].Membership = ms
		cs[i].Removals = map[etcdmedic.ID]string{memberID("m3"): "removed at index 80"}
	}
	return &Assessment{Candidates: cs}
}

// How the survivor is chosen, what the choice costs the others, and what the operator's
// --survivor may and may not override.
func TestChooseSurvivor(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a          *Assessment
		override   string
		survivor   string
		err        string
		standings  string // name=standing, in candidate order
		warning    string
		indexGapM1 uint64
	}{
		{name: "the most up-to-date member, the others' gap stated",
			a:        threeMembers(logOf("m1", 5, 100, 100, 100), logOf("m2", 5, 120, 120, 120)),
			survivor: "m2", standings: "m1=voter m2=voter", indexGapM1: 20},
		{name: "a removed member's data is out of the membership, a learner stays a learner",
			a:        threeMembers(logOf("m1", 5, 120, 120, 120), logOf("m3", 5, 70, 70, 70), logOf("m4", 5, 110, 110, 110)),
			survivor: "m1", standings: "m1=voter m3=removed at index 80 m4=learner"},
		{name: "--survivor overrides the choice and says what it loses",
			a:        threeMembers(logOf("m1", 5, 100, 100, 100), logOf("m2", 5, 120, 120, 120)),
			override: "m1", survivor: "m1", standings: "m1=voter m2=voter",
			warning: "--survivor m1 loses what m2 has beyond it: 20 raft entries, 20 revisions"},
		{name: "--survivor on a rejected data dir is refused",
			a:        threeMembers(rejected(logOf("m1", 5, 100, 100, 100), "torn pages"), logOf("m2", 5, 120, 120, 120)),
			override: "m1", err: "--survivor m1 cannot be used: torn pages"},
		{name: "--survivor naming no data dir is refused",
			a:        threeMembers(logOf("m2", 5, 120, 120, 120)),
			override: "m9", err: "--survivor m9: no such member"},
		{name: "no usable data dir at all",
			a:   threeMembers(rejected(logOf("m1", 5, 100, 100, 100), "unreadable")),
			err: "no usable data dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.choose(tc.override, false)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.a.Survivor != tc.survivor || tc.a.Override != (tc.override != "") {
				t.Errorf("survivor %s (override %v), want %s", tc.a.Survivor, tc.a.Override, tc.survivor)
			}
			var st []string
			for _, c := range tc.a.Candidates {
				st = append(st, c.Name+"="+c.Standing)
			}
			if got := strings.Join(st, " "); got != tc.standings {
				t.Errorf("standings %q, want %q", got, tc.standings)
			}
			if got := strings.Join(tc.a.Warnings, "; "); got != tc.warning {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
			if m1 := tc.a.find("m1"); m1 != nil && m1.IndexGap != tc.indexGapM1 {
				t.Errorf("m1's index gap %d, want %d", m1.IndexGap, tc.indexGapM1)
			}
		})
	}
}

// One cluster-ID policy: the cluster most data dirs belong to; a data dir of another cluster
// (a wrong path, a volume mixed up) is never chosen, and a plan that would touch it is refused.
func TestAnotherClustersDataIsNeverTouched(t *testing.T) {
	stranger := logOf("m3", 9, 999, 999, 999)
	stranger.ClusterID = 0xc2
	wiped := Candidate{Name: "m4", Wiped: true, Rejected: "wiped"}
	a := &Assessment{Candidates: []Candidate{logOf("m1", 5, 100, 100, 100), logOf("m2", 5, 120, 120, 120), stranger, wiped}}
	a.settleClusterID()
	if a.ClusterID != 0xc1 {
		t.Fatalf("cluster %s, want c1 (two of three data dirs)", a.ClusterID)
	}
	if got := a.find("m3").Rejected; !strings.Contains(got, "belongs to cluster c2, not c1") {
		t.Errorf("m3 rejected for %q", got)
	}
	if got := a.find("m4").Rejected; got != "wiped" {
		t.Errorf("a wiped member (no cluster ID) keeps its own reason, got %q", got)
	}
	if err := a.choose("", false); err != nil || a.Survivor != "m2" {
		t.Fatalf("survivor %s, err %v: want m2, never the stranger with the longest log", a.Survivor, err)
	}
	if _, err := NewPlan(a, PlanOptions{BackupDir: t.TempDir()}, time.Now()); err == nil || !strings.Contains(err.Error(), "never moves another cluster's data") {
		t.Errorf("plan with another cluster's data dir: %v", err)
	}
}
