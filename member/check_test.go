package member

import (
	"errors"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/cluster/clustertest"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// The cluster of these tables: m1, m2, m3 (kubeadm's three masters, incident 2); l4 is a learner
// added for a fourth member (or for m3's replacement), and newPeer the URL a new member will use.
var (
	m1, m2, m3 = clustertest.Voter("a1", "m1"), clustertest.Voter("a2", "m2"), clustertest.Voter("a3", "m3")
	l4         = etcdmedic.Member{ID: etcdmedic.MustParseID("a4"), PeerURLs: etcdmedic.URLs{"http://10.0.0.14:2380"}, IsLearner: true}
	newPeer    = []string{"http://10.0.0.15:2380"}
	liveID     = etcdmedic.MustParseID("c1")
)

// answers is the live cluster liveID as probes find it when the members in up answer.
func answers(members []etcdmedic.Member, up ...etcdmedic.Member) *cluster.View {
	return clustertest.Answering(liveID, members, up...)
}

func TestCheckChange(t *testing.T) {
	three := []etcdmedic.Member{m1, m2, m3}
	withLearner := []etcdmedic.Member{m1, m2, m3, l4}
	for _, tc := range []struct {
		name      string
		view      *cluster.View
		joining   []string
		replacing []etcdmedic.ID
		// want is a phrase of the refusal, "" for none; pending says it is ErrLearnerPending.
		want    string
		pending bool
	}{
		{name: "healthy: add a member", view: answers(three, m1, m2, m3), joining: newPeer},
		{name: "no member answered", view: answers(three), joining: newPeer, want: "no member of the cluster answered"},
		{name: "quorum lost (incident 2): a change cannot commit", view: answers(three, m1), joining: newPeer, want: "no quorum (1 of 3 voters up)"},
		{name: "one of three down: quorum holds", view: answers(three, m1, m2), joining: newPeer},
		{name: "another learner pending", view: answers(withLearner, m1, m2, m3), joining: newPeer, want: "learner a4 is still pending", pending: true},
		{name: "the joining member's own learner, on a rerun", view: answers(withLearner, m1, m2, m3), joining: l4.PeerURLs},
		{name: "replacing the pending learner itself", view: answers(withLearner, m1, m2, m3), joining: newPeer, replacing: []etcdmedic.ID{l4.ID}},
		{name: "replacing a down member of three", view: answers(three, m1, m2), joining: newPeer, replacing: []etcdmedic.ID{m3.ID}},
		{name: "replacing while the cluster has no quorum", view: answers(three, m1), joining: newPeer, replacing: []etcdmedic.ID{m3.ID}, want: "no quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkChange(tc.view, tc.joining, tc.replacing)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if !errors.Is(err, ErrRefused) {
				t.Errorf("%v is not ErrRefused", err)
			}
			if errors.Is(err, ErrLearnerPending) != tc.pending {
				t.Errorf("errors.Is(%v, ErrLearnerPending) = %v, want %v", err, !tc.pending, tc.pending)
			}
		})
	}
}

// CheckRemove is the decision of member remove and of the removal in member replace
// (quorumAfterRemoval): which member, and whether the voters left up still make a quorum.
func TestCheckRemove(t *testing.T) {
	three := []etcdmedic.Member{m1, m2, m3}
	for _, tc := range []struct {
		name   string
		view   *cluster.View
		member string
		want   string // a phrase of the refusal, "" for none
	}{
		{name: "a down member of three", view: answers(three, m1, m2), member: "m3"},
		{name: "an up member of three, all up", view: answers(three, m1, m2, m3), member: "m1"},
		{name: "an up voter while another is down: quorum would be lost", view: answers(three, m1, m3), member: "m1", want: "removing m1 (a1) (up) would leave 1 of 2 voters up, 2 are needed"},
		{name: "by hex ID", view: answers(three, m1, m2), member: "a3"},
		{name: "a learner, with one voter down", view: answers([]etcdmedic.Member{m1, m2, m3, l4}, m1, m2, l4), member: "a4"},
		{name: "a down voter while a learner is pending", view: answers([]etcdmedic.Member{m1, m2, m3, l4}, m1, m2, l4), member: "m3"},
		{name: "the only member", view: answers([]etcdmedic.Member{m1}, m1), member: "m1", want: "would leave 0 of 0 voters up, 1 are needed"},
		{name: "no such member", view: answers(three, m1, m2, m3), member: "m9", want: `no member "m9" (members: m1 (a1), m2 (a2), m3 (a3))`},
		{name: "no member answered", view: answers(three), member: "m3", want: "no member of the cluster answered"},
		{name: "quorum lost (incident 2)", view: answers(three, m1), member: "m3", want: "no quorum"},
		// Review item 2: m2 partitioned from its peers still answers clients; removing m3
		// would leave m1 and a cut-off m2, which commit nothing.
		{name: "an up voter while another is cut off from its peers", view: clustertest.CutOff(answers(three, m1, m2, m3), m2), member: "m3", want: "removing m3 (a3) (up) would leave 1 of 2 voters up, 2 are needed"},
		{name: "the cut-off voter itself", view: clustertest.CutOff(answers(three, m1, m2, m3), m2), member: "m2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := CheckRemove(tc.view, tc.member)
			if tc.want == "" {
				if err != nil || m == nil || !m.Is(tc.member) {
					t.Fatalf("member %v, error %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

func TestCheckPromote(t *testing.T) {
	v := answers([]etcdmedic.Member{m1, m2, m3, l4}, m1, m2, m3)
	for _, tc := range []struct {
		name, learner, want string
	}{
		{name: "the pending learner", learner: "a4"},
		{name: "a voter already (a rerun after the promotion went through)", learner: "m2", want: "m2 (a2) is not a learner of this cluster: it is a voter already"},
		{name: "no such member", learner: "l9", want: "l9 is not a learner of this cluster (members: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := checkPromote(v, tc.learner)
			if tc.want == "" {
				if err != nil || m == nil || m.ID != l4.ID {
					t.Fatalf("member %v, error %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	if _, err := checkPromote(answers([]etcdmedic.Member{m1, m2, m3, l4}), "a4"); err == nil || !strings.Contains(err.Error(), "no member of the cluster answered") {
		t.Errorf("nobody answered: %v", err)
	}
}

// m4 as an earlier run of `member replace m3 --name m4 --peer-urls newPeer` left it: added as
// a learner and never started (no name yet), started as a learner, or promoted.
var (
	m4Added    = etcdmedic.Member{ID: etcdmedic.MustParseID("a5"), PeerURLs: etcdmedic.URLs(newPeer), IsLearner: true}
	m4Started  = etcdmedic.Member{ID: m4Added.ID, Name: "m4", PeerURLs: m4Added.PeerURLs, ClientURLs: etcdmedic.URLs{"http://10.0.0.15:2379"}, IsLearner: true}
	m4Promoted = etcdmedic.Member{ID: m4Added.ID, Name: "m4", PeerURLs: m4Added.PeerURLs, ClientURLs: m4Started.ClientURLs}
	replaceM4  = JoinSpec{Name: "m4", PeerURLs: newPeer}
)

// checkOldGone: replace goes on without OLD only when an earlier run of the same replace
// removed it; a mistyped OLD is refused, whatever the dry run or the real run.
func TestCheckOldGone(t *testing.T) {
	two := []etcdmedic.Member{m1, m2} // m3 removed, or never there
	record := &replaceRecord{ClusterID: liveID, Old: m3, NewName: "m4", NewPeerURLs: newPeer}
	for _, tc := range []struct {
		name    string
		members []etcdmedic.Member
		old     string
		spec    JoinSpec
		rec     *replaceRecord
		ok      bool
	}{
		{name: "mistyped OLD, nothing added, no record", members: []etcdmedic.Member{m1, m2, m3}, old: "m3-typo", spec: replaceM4},
		{name: "OLD removed by hand, no record", members: two, old: "m3", spec: replaceM4},
		{name: "the earlier run got as far as the add", members: append(two, m4Added), old: "m3", spec: replaceM4, ok: true},
		{name: "the earlier run started the learner", members: append(two, m4Started), old: "m3", spec: replaceM4, ok: true},
		{name: "the earlier run promoted it", members: append(two, m4Promoted), old: "m3", spec: replaceM4, ok: true},
		{name: "a member holds one of the new peer URLs, not exactly them", members: append(two, m4Added), old: "m3", spec: JoinSpec{Name: "m4", PeerURLs: append([]string{"http://10.0.0.16:2380"}, newPeer...)}},
		{name: "the earlier run recorded removing m3, then stopped before the add", members: two, old: "m3", spec: replaceM4, rec: record, ok: true},
		{name: "the record names m3 by its ID", members: two, old: "a3", spec: replaceM4, rec: record, ok: true},
		{name: "a record of another old member", members: two, old: "m2-typo", spec: replaceM4, rec: record},
		{name: "a record of another new member", members: two, old: "m3", spec: JoinSpec{Name: "m5", PeerURLs: []string{"http://10.0.0.16:2380"}}, rec: record},
		{name: "a record of another cluster", members: two, old: "m3", spec: replaceM4, rec: &replaceRecord{ClusterID: etcdmedic.MustParseID("c2"), Old: m3, NewName: "m4", NewPeerURLs: newPeer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evidence, err := checkOldGone(answers(tc.members, tc.members...), tc.old, tc.spec, tc.rec)
			if tc.ok {
				if err != nil || evidence == "" {
					t.Fatalf("refused (%v), evidence %q", err, evidence)
				}
				return
			}
			if !errors.Is(err, ErrNoSuchMember) || !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v, want ErrNoSuchMember and ErrRefused", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "m1 (a1)") || !strings.Contains(msg, "m2 (a2)") {
				t.Errorf("the refusal does not name the members there are: %v", err)
			}
		})
	}
}

// checkPeerURLsFree: replace refuses, before it removes anything, peer URLs that another
// member holds; the member an earlier run of the same replace added is not another member.
func TestCheckPeerURLsFree(t *testing.T) {
	three := []etcdmedic.Member{m1, m2, m3}
	m5Learner := etcdmedic.Member{ID: m4Added.ID, Name: "m5", PeerURLs: m4Added.PeerURLs, ClientURLs: m4Started.ClientURLs, IsLearner: true}
	wider := etcdmedic.Member{ID: m4Added.ID, PeerURLs: etcdmedic.URLs{"http://10.0.0.16:2380", newPeer[0]}, IsLearner: true}
	for _, tc := range []struct {
		name    string
		members []etcdmedic.Member
		old     string // "" when an earlier run removed it
		spec    JoinSpec
		started etcdmedic.ID // the member an earlier run started on the new data dir
		holder  etcdmedic.ID // who holds them, NoID when free
	}{
		{name: "free peer URLs", members: three, old: "m3", spec: replaceM4},
		{name: "OLD's own peer URLs: replaced in place", members: three, old: "m3", spec: JoinSpec{Name: "m4", PeerURLs: m3.PeerURLs}},
		{name: "m1's peer URL, copy-pasted", members: three, old: "m3", spec: JoinSpec{Name: "m4", PeerURLs: m1.PeerURLs}, holder: m1.ID},
		{name: "m1's peer URL among others", members: three, old: "m3", spec: JoinSpec{Name: "m4", PeerURLs: append([]string{newPeer[0]}, m1.PeerURLs...)}, holder: m1.ID},
		{name: "m1's peer URL, OLD removed already", members: []etcdmedic.Member{m1, m2}, spec: JoinSpec{Name: "m4", PeerURLs: m1.PeerURLs}, holder: m1.ID},
		{name: "the learner an earlier run added, never started", members: []etcdmedic.Member{m1, m2, m4Added}, spec: replaceM4},
		{name: "the learner an earlier run added and started", members: []etcdmedic.Member{m1, m2, m4Started}, spec: replaceM4},
		{name: "that learner, OLD still there (added by member add)", members: []etcdmedic.Member{m1, m2, m3, m4Added}, old: "m3", spec: replaceM4},
		{name: "a learner started as another member", members: []etcdmedic.Member{m1, m2, m5Learner}, spec: replaceM4, holder: m4Added.ID},
		{name: "a learner with more peer URLs than the new member's", members: []etcdmedic.Member{m1, m2, wider}, spec: replaceM4, holder: m4Added.ID},
		{name: "the new member promoted: the replacement is done", members: []etcdmedic.Member{m1, m2, m4Promoted}, spec: replaceM4, holder: m4Added.ID},
		{name: "the new member promoted on the data dir given: the run finishes it", members: []etcdmedic.Member{m1, m2, m4Promoted}, spec: replaceM4, started: m4Added.ID},
		{name: "m1's peer URL, another member started on the data dir", members: []etcdmedic.Member{m1, m2, m4Started}, spec: JoinSpec{Name: "m4", PeerURLs: m1.PeerURLs}, started: m4Added.ID, holder: m1.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := answers(tc.members, tc.members...)
			var target *cluster.MemberView
			if tc.old != "" {
				target = v.Find(tc.old)
			}
			err := checkPeerURLsFree(v, target, tc.spec, tc.started)
			if tc.holder == etcdmedic.NoID {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var taken *PeerURLsTakenError
			if !errors.As(err, &taken) || taken.Holder.ID != tc.holder || !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v, want a PeerURLsTakenError naming %s", err, tc.holder)
			}
			if !strings.Contains(err.Error(), taken.Holder.Label()) {
				t.Errorf("the refusal does not say which member holds the URLs: %v", err)
			}
		})
	}
}

// startedOn: a rerun goes on from the new data dir, instead of guarding it, only when it holds
// the very member an earlier run of the same replace or add added and started there.
func TestStartedOn(t *testing.T) {
	own := &datadir.Identity{ClusterID: liveID, MemberID: m4Added.ID}
	for _, tc := range []struct {
		name   string
		member etcdmedic.Member
		spec   JoinSpec
		dir    *datadir.Identity
		want   bool
	}{
		{name: "the learner started there, killed before the promotion", member: m4Started, spec: replaceM4, dir: own, want: true},
		{name: "the learner started there, killed before it published its name", member: m4Added, spec: replaceM4, dir: own, want: true},
		{name: "promoted there, killed before the verification", member: m4Promoted, spec: replaceM4, dir: own, want: true},
		{name: "an empty data dir", member: m4Started, spec: replaceM4},
		{name: "the data of another member (m3's old volume)", member: m4Started, spec: replaceM4, dir: &datadir.Identity{ClusterID: liveID, MemberID: m3.ID}},
		{name: "the same member ID in another cluster", member: m4Started, spec: replaceM4, dir: &datadir.Identity{ClusterID: etcdmedic.MustParseID("c2"), MemberID: m4Added.ID}},
		{name: "no member ID in the WAL", member: m4Started, spec: replaceM4, dir: &datadir.Identity{ClusterID: liveID}},
		{name: "started under another name", member: m4Started, spec: JoinSpec{Name: "m5", PeerURLs: newPeer}, dir: own},
		{name: "the member has more peer URLs than the new one", member: etcdmedic.Member{ID: m4Added.ID, Name: "m4", PeerURLs: etcdmedic.URLs{newPeer[0], "http://10.0.0.16:2380"}, IsLearner: true}, spec: replaceM4, dir: own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startedOn(tc.member, liveID, tc.spec, tc.dir); got != tc.want {
				t.Fatalf("startedOn = %v, want %v", got, tc.want)
			}
		})
	}
}
