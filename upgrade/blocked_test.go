package upgrade

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
)

// critical is a check's critical finding, as the rule of that ID writes it.
func critical(id string) finding.Finding {
	return finding.Finding{ID: id, Severity: finding.Critical, Summary: id + " found", Remedy: "the remedy of " + id + "."}
}

func hops(versions ...string) []Hop {
	var out []Hop
	for _, v := range versions {
		out = append(out, Hop{Version: v})
	}
	return out
}

// Review item 4: a critical finding blocks the plan (and its apply) unless a hop of the plan
// exists for it. Each row a situation, with the hops Hops lays out for it.
func TestPlanRefusesWhatItsHopsDoNotRouteAround(t *testing.T) {
	warning := func(id string) finding.Finding { f := critical(id); f.Severity = finding.Warning; return f }
	info := func(id string) finding.Finding { f := critical(id); f.Severity = finding.Info; return f }
	for _, tc := range []struct {
		name     string
		from     string
		hops     []Hop
		findings []finding.Finding
		blocked  []string // the IDs left, in the check's order
	}{
		{"a SAFE check", "3.5.24", hops("v3.6.16"), nil, nil},
		{"warnings and notes only: a rolling step in progress, stale flags possible, MemberUpdate bug", "3.5.21", hops("v3.5.24", "v3.5.24", "v3.6.16"),
			[]finding.Finding{warning(IDMixedVersions), warning(IDRollingReplace), info(IDMemberUpdateBug)}, nil},
		{"incident 3: v3.5.19 with promoted learners, through v3.5.24 and its full restart", "3.5.19", hops("v3.5.24", "v3.5.24", "v3.6.16"),
			[]finding.Finding{critical(IDTooOld), critical(IDMembershipDrift), critical(IDMembershipDrift), info(IDMemberUpdateBug)}, nil},
		{"incident 3 with a member's membership unread (down, or a learner), through the full restart", "3.5.19", hops("v3.5.24", "v3.5.24", "v3.6.16"),
			[]finding.Finding{critical(IDTooOld), critical(IDMembershipUnknown)}, nil},
		{"drift on v3.5.24: no restart hop, v3.6 straight away", "3.5.24", hops("v3.6.16"),
			[]finding.Finding{critical(IDMembershipDrift)}, []string{IDMembershipDrift}},
		{"membership unread on v3.5.24: no restart hop", "3.5.24", hops("v3.6.16"),
			[]finding.Finding{critical(IDMembershipUnknown)}, []string{IDMembershipUnknown}},
		{"drift on v3.5.24, a plan that restarts every member on it", "3.5.24", hops("v3.5.24"),
			[]finding.Finding{critical(IDMembershipDrift)}, nil},
		{"drift on v3.5.21, restarted on v3.5.21 only: before the snapshot fix", "3.5.21", hops("v3.5.21"),
			[]finding.Finding{critical(IDMembershipDrift)}, []string{IDMembershipDrift}},
		{"v2 custom keys, v3.5.24 to v3.6 (v3.6 refuses to start)", "3.5.24", hops("v3.6.16"),
			[]finding.Finding{critical(IDV2CustomData)}, []string{IDV2CustomData}},
		{"v2 custom keys from v3.5.19: the hops take care of the rest only", "3.5.19", hops("v3.5.24", "v3.5.24", "v3.6.16"),
			[]finding.Finding{critical(IDTooOld), critical(IDV2CustomData), critical(IDMembershipDrift), critical(IDV2CustomData)}, []string{IDV2CustomData, IDV2CustomData}},
		{"auth on, v3.4 to v3.5 rolling (#11943)", "3.4.22", hops("v3.5.21"),
			[]finding.Finding{critical(IDAuthRolling34)}, []string{IDAuthRolling34}},
		{"v3.4 to v3.5.1 (#13967)", "3.4.22", hops("v3.5.1"),
			[]finding.Finding{critical(IDEarly35)}, []string{IDEarly35}},
		{"zombie members, through v3.5.24: only v3.5.26 removes them", "3.5.19", hops("v3.5.24", "v3.5.24", "v3.6.16"),
			[]finding.Finding{critical(IDTooOld), critical(IDZombieMembers), critical(IDMembershipDrift)}, []string{IDZombieMembers}},
		{"zombie members, through v3.5.26 and its full restart", "3.5.19", hops("v3.5.26", "v3.5.26", "v3.6.16"),
			[]finding.Finding{critical(IDTooOld), critical(IDZombieMembers), critical(IDMembershipDrift)}, nil},
		{"a downgrade, v3.6 to v3.5: the plan lowers the storage version first", "3.6.16", hops("v3.5.24"),
			[]finding.Finding{critical(IDDowngrade)}, nil},
		{"v3.5 to v3.7 through v3.6.16", "3.5.24", hops("v3.6.16", "v3.7.3"),
			[]finding.Finding{critical(IDSkipsMinor)}, nil},
		{"v3.5 to v3.7 through v3.6.8, below the minimum for v3.7", "3.5.24", hops("v3.6.8", "v3.7.3"),
			[]finding.Finding{critical(IDSkipsMinor)}, []string{IDSkipsMinor}},
		{"v3.6.8 to v3.7 (below v3.6.11)", "3.6.8", hops("v3.7.3"),
			[]finding.Finding{critical(IDBelowMinimum)}, []string{IDBelowMinimum}},
		{"a critical finding no hop is named for (a rule added later)", "3.5.24", hops("v3.5.24", "v3.6.16"),
			[]finding.Finding{critical("upgrade-something-new")}, []string{"upgrade-something-new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, err := ParseVersion(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range notRoutedAround(tc.findings, from, tc.hops) {
				got = append(got, f.ID)
			}
			if !slices.Equal(got, tc.blocked) {
				t.Fatalf("blocked by %v, want %v", got, tc.blocked)
			}
		})
	}
}

// The hops Hops lays out agree with the table above: from v3.5.19 the full restart on v3.5.24
// is there, and the findings it exists for do not block; v2 custom keys still do, and NewPlan
// says which, with the remedy.
func TestNewPlanRefusesABlockedCheckWithEachRemedy(t *testing.T) {
	bins := map[string]string{"v3.5.24": "/opt/etcd-3.5.24", "v3.6.16": "/opt/etcd-3.6.16"}
	members := []Member{{Name: "m1", DataDir: "/var/lib/etcd-m1"}}
	from, to := mustVersion(t, "3.5.19"), mustVersion(t, "3.6.16")
	incident3 := &Report{Verdict: "BLOCKED", Findings: []finding.Finding{critical(IDTooOld), critical(IDMembershipDrift)}}
	p, err := NewPlan(incident3, from, to, members, bins, t.TempDir(), nil, time.Now())
	if err != nil || len(p.Hops) != 3 {
		t.Fatalf("incident 3's plan: %v", err)
	}
	v2 := critical(IDV2CustomData)
	v2.Summary, v2.Remedy = "m1's v2 store holds 3 custom keys", "Migrate or delete the v2 keys on v3.5; verify with etcdutl check v2store."
	blockedCheck := &Report{Verdict: "BLOCKED", Findings: []finding.Finding{critical(IDTooOld), v2, critical(IDMembershipDrift)}}
	_, err = NewPlan(blockedCheck, from, to, members, bins, t.TempDir(), nil, time.Now())
	var blocked *BlockedError
	if !errors.Is(err, ErrBlocked) || !errors.As(err, &blocked) || len(blocked.Findings) != 1 || blocked.Findings[0].ID != IDV2CustomData {
		t.Fatalf("a plan with v2 custom keys: %v", err)
	}
	for _, want := range []string{IDV2CustomData, v2.Summary, "etcdutl check v2store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := NewPlan(nil, from, to, members, bins, t.TempDir(), nil, time.Now()); !errors.Is(err, ErrBlocked) {
		t.Fatalf("a plan without a check: %v", err)
	}
}

// apply checks the plan's recorded check again: a plan made by an earlier etcdmedic for a
// cluster with v2 custom keys is refused before its first step, with nothing journaled and
// no event (so nothing started or stopped); likewise a plan that records no check.
func TestApplyRefusesAPlanWhoseCheckIsBlocked(t *testing.T) {
	for name, check := range map[string]*Report{
		"v2 custom keys": {Verdict: "BLOCKED", Findings: []finding.Finding{critical(IDV2CustomData)}},
		"no check":       nil,
	} {
		t.Run(name, func(t *testing.T) {
			a, events := journaled(t, func(*plan.Journal, time.Time) {})
			a.Plan.Check = check
			a.Plan.Hops = hops("v3.6.16")
			res, err := a.Apply(t.Context())
			if !errors.Is(err, ErrBlocked) || res.Upgraded || len(res.Timings) != 0 || len(*events) != 0 {
				t.Fatalf("apply: %v, result %+v, events %+v", err, res, *events)
			}
			if _, err := os.Stat(filepath.Join(a.Dir, plan.JournalFile)); err == nil {
				t.Fatal("a refused apply wrote a journal")
			}
		})
	}
}

func mustVersion(t *testing.T, s string) *Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The same on a live v3.5.24 cluster: its plan, as an earlier etcdmedic made it, records a
// check whose v2 custom keys no hop routes around. apply refuses before its first step: every
// member keeps its process and serves writes, and no journal is written.
func TestApplyOfABlockedPlanStopsNoMember(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_5_24})
	p := restartPlan(t, c)
	p.Check.Verdict = "BLOCKED"
	p.Check.Findings = append(p.Check.Findings, critical(IDV2CustomData))
	var before []int
	for _, m := range c.Members() {
		before = append(before, pidOn(m))
	}
	dir := t.TempDir()
	a := &Applier{Plan: p, Dir: dir, Timeout: 5 * time.Second}
	res, err := a.Apply(t.Context())
	var blocked *BlockedError
	if !errors.As(err, &blocked) || len(blocked.Findings) != 1 || blocked.Findings[0].ID != IDV2CustomData || res.Upgraded {
		t.Fatalf("apply of a blocked plan: %v (result %+v)", err, res)
	}
	var after []int
	for _, m := range c.Members() {
		after = append(after, pidOn(m))
		servesWrites(t, m)
	}
	if !slices.Equal(before, after) || slices.Contains(after, 0) {
		t.Fatalf("the members ran as pids %v, now %v: a refused apply restarted one", before, after)
	}
	if _, err := os.Stat(filepath.Join(dir, plan.JournalFile)); err == nil {
		t.Fatal("a refused apply wrote a journal")
	}
}
