package finding

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// probe builds what one member's endpoint would answer.
func probe(id, leader string, index uint64, mutate ...func(*cluster.Probe)) *cluster.Probe {
	p := &cluster.Probe{
		Endpoint: "http://" + id, Reached: true, Healthy: true,
		Status: &cluster.Status{ClusterID: etcdmedic.MustParseID("c1"), MemberID: etcdmedic.MustParseID(id), Leader: etcdmedic.MustParseID(leader), RaftTerm: 2, RaftIndex: index, AppliedIndex: index, DBSize: 1 << 20, DBSizeInUse: 1 << 20, Version: "3.6.16"},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func withMembers(ps []*cluster.Probe, ids ...string) []*cluster.Probe {
	var ms []etcdmedic.Member
	for _, id := range ids {
		ms = append(ms, etcdmedic.Member{ID: etcdmedic.MustParseID(id), Name: "n" + id, PeerURLs: []string{"http://" + id + ":2380"}, ClientURLs: []string{"http://" + id}})
	}
	for _, p := range ps {
		if p.Reached {
			p.Members = ms
		}
	}
	return ps
}

// learner is what a learner answers: its status says so, and doctor asks it no linearizable read.
func learner(p *cluster.Probe) {
	p.Status.IsLearner, p.Healthy, p.HealthErr = true, false, "not asked (etcd serves a learner no linearizable read)"
}

// withLearner is the healthy cluster a, b, c (leader a, raft index 5000) with learner f.
func withLearner(learner *cluster.Probe) []*cluster.Probe {
	ps := withMembers([]*cluster.Probe{probe("a", "a", 5000), probe("b", "a", 5000), probe("c", "a", 5000)}, "a", "b", "c")
	ms := append(ps[0].Members, etcdmedic.Member{ID: etcdmedic.MustParseID("f"), Name: "nf", PeerURLs: []string{"http://f:2380"}, ClientURLs: []string{"http://f"}, IsLearner: true})
	for _, p := range ps {
		p.Members = ms
	}
	return append(ps, learner)
}

func cutOff(p *cluster.Probe) {
	p.ReadAsked, p.Healthy, p.HealthErr = true, false, "no answer within the command timeout"
}

func timedOut(p *cluster.Probe) {
	p.Reached, p.Status, p.Error, p.Healthy = false, nil, "no answer within the command timeout", false
}

func judge(ps []*cluster.Probe) []Finding {
	return ForCluster(cluster.BuildView(ps, time.Unix(0, 0)), DefaultClusterRules())
}

func ids(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Severity)+":"+f.ID)
	}
	return strings.Join(out, " ")
}

// Conditions that real clusters show only in passing (an election) or that cannot be made on
// purpose (a CORRUPT alarm) are judged here on constructed views; the rest are proven on real
// clusters in cmd/etcdmedic.
func TestClusterRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes []*cluster.Probe
		want   string
	}{
		{"healthy", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100)}, "a", "b", "c"), ""},
		{"leaders disagree", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "c", 100)}, "a", "b", "c"), "warning:leaders-disagree"},
		{"lagging at the threshold is fine", withMembers([]*cluster.Probe{probe("a", "a", 2000), probe("b", "a", 1000), probe("c", "a", 2000)}, "a", "b", "c"), ""},
		{"lagging past it", withMembers([]*cluster.Probe{probe("a", "a", 2001), probe("b", "a", 1000), probe("c", "a", 2001)}, "a", "b", "c"), "warning:member-lagging"},
		{"corrupt alarm", withMembers([]*cluster.Probe{probe("a", "a", 1, func(p *cluster.Probe) {
			p.Alarms = []cluster.Alarm{{MemberID: etcdmedic.MustParseID("b"), Alarm: "CORRUPT"}}
		}), probe("b", "a", 1), probe("c", "a", 1)}, "a", "b", "c"), "critical:alarm-corrupt"},
		{"near quota", withMembers([]*cluster.Probe{probe("a", "a", 1, func(p *cluster.Probe) {
			p.Status.DBSize, p.Status.DBSizeInUse, p.Status.DBSizeQuota = 850, 850, 1000
		}), probe("b", "a", 1), probe("c", "a", 1)}, "a", "b", "c"), "warning:db-near-quota"},
		{"single voter", withMembers([]*cluster.Probe{probe("a", "a", 1)}, "a"), "info:no-fault-tolerance"},
		// Review item 3: etcd refuses a learner the linearizable read; it is judged by the leader it names.
		{"a learner that caught up", withLearner(probe("f", "a", 5000, learner)), "warning:learner-not-promoted"},
		{"a learner still catching up", withLearner(probe("f", "a", 10, learner)), "warning:member-lagging"},
		{"a learner cut off: it names no leader", withLearner(probe("f", "0", 10, learner)), "warning:member-cut-off warning:member-lagging"},
		// Review item 2: a voter cut off from its peers answers clients but is not in the quorum.
		// Review of the fix: a read that timed out (a busy cluster, a leader change) from a voter
		// that names the leader the others name does not take it out of the quorum; a voter
		// partitioned from its peers names no leader once its election timeout passes.
		{"a voter whose read failed but names the leader: a warning, the quorum whole", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100, cutOff), probe("c", "a", 100)}, "a", "b", "c"),
			"warning:member-cut-off"},
		{"partitioned long enough to know no leader", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "0", 100, noLeader), probe("c", "a", 100)}, "a", "b", "c"),
			"critical:quorum-at-risk warning:member-cut-off"},
		{"one of five cut off: still tolerates one failure", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100, cutOff), probe("c", "a", 100), probe("d", "a", 100), probe("e", "a", 100)}, "a", "b", "c", "d", "e"),
			"warning:member-cut-off"},
		{"an election: every voter answers, none knows a leader yet", withMembers([]*cluster.Probe{probe("a", "0", 100, noLeader), probe("b", "0", 100, noLeader), probe("c", "0", 100, noLeader)}, "a", "b", "c"),
			"critical:no-leader"},
		// Review item 1: a member doctor could not ask is neither up nor down.
		{"--no-discover on a healthy cluster: the others not probed", withMembers([]*cluster.Probe{probe("a", "a", 100)}, "a", "b", "c"),
			"warning:member-not-verified warning:member-not-verified warning:quorum-not-verified"},
		{"the others time out from this host: not verified, never lost", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100, timedOut), probe("c", "a", 100, timedOut)}, "a", "b", "c"),
			"warning:member-not-verified warning:member-not-verified warning:quorum-not-verified"},
		{"one voter times out: quorum holds, its tolerance unknown", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100, timedOut)}, "a", "b", "c"),
			"warning:member-not-verified warning:quorum-not-verified"},
		{"one voter refuses: quorum at risk", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100, down)}, "a", "b", "c"),
			"critical:quorum-at-risk warning:member-unreachable"},
		{"two refuse, the last knows no leader: quorum lost", withMembers([]*cluster.Probe{probe("a", "0", 100, noLeader), probe("b", "a", 100, down), probe("c", "a", 100, down)}, "a", "b", "c"),
			"critical:no-leader critical:quorum-lost warning:member-unreachable warning:member-unreachable"},
		{"the one reached knows no leader, the others time out: not verified", withMembers([]*cluster.Probe{probe("a", "0", 100, noLeader), probe("b", "a", 100, timedOut), probe("c", "a", 100, timedOut)}, "a", "b", "c"),
			"critical:no-leader critical:quorum-not-verified warning:member-not-verified warning:member-not-verified"},
		{"two refuse, the last still names a leader: not lost yet, not verified", withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100, down), probe("c", "a", 100, down)}, "a", "b", "c"),
			"critical:quorum-not-verified warning:member-unreachable warning:member-unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(judge(tc.probes)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A member that advertises two client URLs, both probed and both refusing: the second is its
// own URL, not "no known member's client URL" (review item 13).
func TestSecondClientURLOfAKnownMember(t *testing.T) {
	ps := withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100)}, "a", "b", "c")
	ms := ps[0].Members
	for i := range ms {
		if ms[i].Name == "nc" {
			ms[i].ClientURLs = []string{"http://c", "http://c2"}
		}
	}
	ps = append(ps, &cluster.Probe{Endpoint: "http://c", Discovered: true, Error: "connection refused", Refused: true},
		&cluster.Probe{Endpoint: "http://c2", Discovered: true, Error: "connection refused", Refused: true})
	fs := judge(ps)
	for _, f := range fs {
		if f.ID == IDEndpointUnreachable {
			t.Errorf("%s: %s", f.ID, f.Summary)
		}
	}
	if !strings.Contains(ids(fs), "warning:member-unreachable") {
		t.Errorf("the down member itself must still be reported: %s", ids(fs))
	}
}

func TestEveryClusterFindingCarriesEvidenceAndRemedy(t *testing.T) {
	dead := &cluster.Probe{Endpoint: "http://c", Error: "connection refused"}
	ps := withMembers([]*cluster.Probe{probe("a", "a", 5000, func(p *cluster.Probe) {
		p.Alarms = []cluster.Alarm{{MemberID: etcdmedic.MustParseID("a"), Alarm: "NOSPACE"}}
		p.Status.DBSize, p.Status.DBSizeInUse, p.Status.DBSizeQuota = 990<<20, 100<<20, 1000<<20
	}), probe("b", "b", 10, func(p *cluster.Probe) { p.Status.Version = "3.5.24" }), dead}, "a", "b", "c")
	fs := judge(ps)
	if len(fs) < 5 {
		t.Fatalf("want many findings, got %s", ids(fs))
	}
	for _, f := range fs {
		if f.ID == "" || f.Summary == "" || f.Why == "" || f.Remedy == "" || (f.Severity != Info && len(f.Evidence) == 0) {
			t.Errorf("incomplete finding %+v", f)
		}
	}
}
