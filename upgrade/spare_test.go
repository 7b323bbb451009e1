package upgrade

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/cluster/clustertest"
)

// The cluster of these tables: voters m1, m2, m3, and l4, a learner (added for a fourth member,
// or for a replacement, and not promoted yet).
var (
	m1, m2, m3 = clustertest.Voter("a1", "m1"), clustertest.Voter("a2", "m2"), clustertest.Voter("a3", "m3")
	l4         = learner(clustertest.Voter("a4", "l4"))
	m5         = clustertest.Voter("a5", "m5") // added after the plan was made
	liveID     = etcdmedic.MustParseID("c1")
	three      = []etcdmedic.Member{m1, m2, m3}
	withL4     = []etcdmedic.Member{m1, m2, m3, l4}
)

func learner(m etcdmedic.Member) etcdmedic.Member {
	m.IsLearner = true
	return m
}

// answers is the live cluster as probes find it when the members in up answer; a learner that
// answers fails the linearizable read, as etcd's learners do.
func answers(members []etcdmedic.Member, up ...etcdmedic.Member) *cluster.View {
	v := clustertest.Answering(liveID, members, up...)
	for _, m := range v.Members {
		if m.IsLearner && m.Up() {
			m.Probe.Healthy = false
		}
	}
	return cluster.BuildView(v.Probes, v.TakenAt)
}

// with is v after change altered what member name answered.
func with(v *cluster.View, name string, change func(*cluster.Probe)) *cluster.View {
	change(v.ByName(name).Probe)
	return cluster.BuildView(v.Probes, v.TakenAt)
}

// cutOff: the member answers its status but knows no leader and cannot read through raft
// (firewalled from its peers, looping on a cluster-ID mismatch, replaying its log).
func cutOff(p *cluster.Probe) { p.Status.Leader, p.Healthy = etcdmedic.NoID, false }

// planOf is a plan's members, restarted in this order.
func planOf(ms ...etcdmedic.Member) []Member {
	var out []Member
	for _, m := range ms {
		out = append(out, Member{Name: m.Name})
	}
	return out
}

// A hop step stops its member only when the cluster can do without it (review item 1: a step
// once stopped m1 although no voter of the cluster could be seen).
func TestHopStepSparesAMemberOnlyWhenTheOthersServe(t *testing.T) {
	for _, tc := range []struct {
		name       string
		view       *cluster.View
		plan       []etcdmedic.Member
		restarting string
		// refused lists the members said not to serve; phrase is a part of the refusal.
		refused    bool
		notServing []string
		phrase     string
	}{
		{name: "healthy: three voters serve", view: answers(three, m1, m2, m3), plan: three, restarting: "m1"},
		{name: "another voter is down (its data disk not mounted after a reboot)", view: answers(three, m1, m2), plan: three, restarting: "m1",
			refused: true, notServing: []string{"m3"}, phrase: "without m1 1 voter(s) would serve, 2 are needed"},
		{name: "another voter answers but is cut off (firewalled, cluster-ID mismatch)", view: with(answers(three, m1, m2, m3), "m3", cutOff), plan: three, restarting: "m1",
			refused: true, notServing: []string{"m3"}},
		{name: "a rerun after that voter went down in the step before (review 1b)", view: answers(three, m1, m2), plan: three, restarting: "m2",
			refused: true, notServing: []string{"m3"}},
		{name: "no voter seen at all (wrong certificates, the review's evidence)", view: answers(three), plan: three, restarting: "m1",
			refused: true, notServing: []string{"m2", "m3"}, phrase: "no member knows a leader"},
		{name: "no leader: an election under way", view: with(with(with(answers(three, m1, m2, m3), "m1", cutOff), "m2", cutOff), "m3", cutOff), plan: three, restarting: "m1",
			refused: true, notServing: []string{"m2", "m3"}, phrase: "no member knows a leader"},
		{name: "two leaders named", view: with(answers(three, m1, m2, m3), "m3", func(p *cluster.Probe) { p.Status.Leader = m3.ID }), plan: three, restarting: "m1",
			refused: true, phrase: "the members name 2 different leaders"},
		{name: "resuming: an interrupted run stopped the member itself", view: answers(three, m2, m3), plan: three, restarting: "m1"},
		{name: "resuming: the member itself runs the new binary but does not serve yet", view: with(answers(three, m2, m3, m1), "m1", cutOff), plan: three, restarting: "m1"},
		{name: "a learner serves serializable reads only: a voter's restart goes on", view: answers(withL4, m1, m2, m3, l4), plan: withL4, restarting: "m1"},
		{name: "the learner's own restart", view: answers(withL4, m1, m2, m3, l4), plan: withL4, restarting: "l4"},
		{name: "the learner down: a voter's restart waits for it", view: answers(withL4, m1, m2, m3), plan: withL4, restarting: "m1",
			refused: true, notServing: []string{"l4"}},
		{name: "a member of the plan the membership no longer shows", view: answers([]etcdmedic.Member{m1, m2}, m1, m2), plan: three, restarting: "m1",
			refused: true, notServing: []string{"m3"}},
		{name: "the only member: its restart is an outage however it is done", view: answers([]etcdmedic.Member{m1}, m1), plan: []etcdmedic.Member{m1}, restarting: "m1"},
		{name: "two voters, the other serving: an outage however it is done", view: answers([]etcdmedic.Member{m1, m2}, m1, m2), plan: []etcdmedic.Member{m1, m2}, restarting: "m2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := canSpare(tc.view, planOf(tc.plan...), tc.restarting)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var cannot *CannotSpareError
			if !errors.As(err, &cannot) {
				t.Fatalf("want a CannotSpareError, got %v", err)
			}
			if cannot.Member != tc.restarting || !slices.Equal(cannot.NotServing, tc.notServing) {
				t.Errorf("refused for %s, not serving %v; want %s, %v", cannot.Member, cannot.NotServing, tc.restarting, tc.notServing)
			}
			if msg := err.Error(); !strings.Contains(msg, "nothing was stopped") || !strings.Contains(msg, tc.phrase) {
				t.Errorf("refusal %q should say nothing was stopped and %q", msg, tc.phrase)
			}
		})
	}
}

// After a hop every member of the plan must be up, and as many voters up as the plan has voters:
// a learner is waited for, never counted as a voter (review item 5: with one, every check step
// failed with "3 of 4 voters up" after the whole hop was applied).
func TestCheckCountsVotersAndWaitsForLearners(t *testing.T) {
	for _, tc := range []struct {
		name string
		view *cluster.View
		plan []etcdmedic.Member
		// down lists the members said not to be up; phrase is a part of the refusal ("": none).
		down   []string
		phrase string
	}{
		{name: "three voters up", view: answers(three, m1, m2, m3), plan: three},
		{name: "three voters and a learner up", view: answers(withL4, m1, m2, m3, l4), plan: withL4},
		{name: "the learner down", view: answers(withL4, m1, m2, m3), plan: withL4, down: []string{"l4"}, phrase: "3 of 3 voters up, not up: l4"},
		{name: "a voter down", view: answers(three, m1, m2), plan: three, down: []string{"m3"}, phrase: "2 of 3 voters up, not up: m3"},
		{name: "a voter down beside an up learner", view: answers(withL4, m1, m2, l4), plan: withL4, down: []string{"m3"}, phrase: "2 of 3 voters up, not up: m3"},
		{name: "a voter the plan does not know", view: answers([]etcdmedic.Member{m1, m2, m3, m5}, m1, m2, m3, m5), plan: three, phrase: "4 of 3 voters up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wholeCluster(tc.view, planOf(tc.plan...))
			if tc.phrase == "" {
				if err != nil {
					t.Fatalf("not whole: %v", err)
				}
				return
			}
			var notWhole *NotWholeError
			if !errors.As(err, &notWhole) || !slices.Equal(notWhole.Down, tc.down) || !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("got %v (down %v); want down %v and %q", err, notWhole, tc.down, tc.phrase)
			}
		})
	}
}
