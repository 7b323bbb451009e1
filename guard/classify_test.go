package guard

import (
	"slices"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/cluster/clustertest"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// The live cluster of these tables: c1, with pd-0, pd-1 and pd-2 (incident 1's PD members).
var (
	liveID  = etcdmedic.MustParseID("c1")
	otherID = etcdmedic.MustParseID("c2")
	pd0     = clustertest.Voter("a0", "pd-0")
	pd1     = clustertest.Voter("a1", "pd-1")
	pd2     = clustertest.Voter("a2", "pd-2")
	// pd2Old is the member pd-2 was before its failover: removed, its ID gone from the membership.
	pd2Old = etcdmedic.MustParseID("f2")
	// newPeer is where a new member (pd-3) will listen; addedPD3 is it after `member add --learner`.
	newPeer  = "http://10.0.0.13:2380"
	addedPD3 = etcdmedic.Member{ID: etcdmedic.MustParseID("a3"), PeerURLs: etcdmedic.URLs{newPeer}, IsLearner: true}
)

// answers is the live cluster liveID as probes find it when the members in up answer.
func answers(members []etcdmedic.Member, up ...etcdmedic.Member) *cluster.View {
	return clustertest.Answering(liveID, members, up...)
}

// noLeader is the three members answering mid-election: quorum up, no leader, no read served.
func noLeader() *cluster.View {
	v := answers([]etcdmedic.Member{pd0, pd1, pd2}, pd0, pd1, pd2)
	for _, m := range v.Members {
		m.Probe.Status.Leader, m.Probe.Healthy = etcdmedic.NoID, false
	}
	v.Leaders = map[etcdmedic.ID][]string{}
	return v
}

// member is a data dir of an etcd (or PD) member, as datadir.Inspect reports it.
func member(kind string, clusterID, id etcdmedic.ID, name string) *datadir.Report {
	return &datadir.Report{Path: "/var/lib/pd", Kind: kind, MemberDir: "/var/lib/pd/member", WALDir: "/var/lib/pd/member/wal",
		Identity: &datadir.Identity{ClusterID: clusterID, MemberID: id, Name: name, InMembership: true},
		Raft:     &datadir.Raft{LastIndex: 850, LastTerm: 3}}
}

// notEtcd is a directory holding names (files), which datadir calls not etcd's.
func notEtcd(t *testing.T, names ...string) *datadir.Report {
	dir := t.TempDir()
	for _, n := range names {
		writeFiles(t, dir, map[string]string{n: "x"})
	}
	return &datadir.Report{Path: dir, Kind: datadir.KindNotEtcd, KindReason: "no member/wal directory with .wal files"}
}

func TestClassify(t *testing.T) {
	healthy := answers([]etcdmedic.Member{pd0, pd1, pd2}, pd0, pd1, pd2)
	afterFailover := answers([]etcdmedic.Member{pd0, pd1}, pd0, pd1) // pd-2 removed
	withPD3Added := answers([]etcdmedic.Member{pd0, pd1, pd2, addedPD3}, pd0, pd1, pd2)
	stalePD2 := member(datadir.KindPDMember, liveID, pd2Old, "pd-2")
	stalePD2.PDJoin = &datadir.PDJoin{Path: "/var/lib/pd/join", Contents: "pd-0=http://10.0.0.10:2380,pd-4=http://10.0.0.14:2380"}
	// pd-2 still ran when it was removed: its own WAL recorded the removal.
	sawItsRemoval := member(datadir.KindPDMember, liveID, pd2Old, "pd-2")
	sawItsRemoval.Identity.RemovedMarked, sawItsRemoval.Identity.InMembership = true, false

	for _, tc := range []struct {
		name   string
		report *datadir.Report
		view   *cluster.View
		expect Expect
		// want is the verdict's class, whether the member may start and whether --fix moves it;
		// why is a phrase its reason must hold.
		want          Class
		safe, movable bool
		why           string
		// wiped is an empty data dir of a member that started: its live record is the evidence.
		wiped bool
	}{
		{name: "no data dir yet", report: nil, view: healthy, want: Empty, safe: true},
		{name: "empty dir (a fresh volume)", report: &datadir.Report{Kind: datadir.KindEmpty}, view: healthy, want: Empty, safe: true},
		{name: "empty dir, member not added yet: etcd would bootstrap a cluster of its own", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: healthy, expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, want: Empty, why: "no member of the live cluster has peer URLs " + newPeer},
		{name: "empty dir, member added as a learner", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: withPD3Added, expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, want: Empty, safe: true},
		{name: "empty dir, nobody answered: whether the member ran before cannot be told", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: answers([]etcdmedic.Member{pd0, pd1, pd2}), expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, want: Unknown, why: "ran before and lost its data"},
		{name: "a new cluster forming (--initial-cluster-state=new): nobody answers yet, as before any cluster forms", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: answers([]etcdmedic.Member{pd0, pd1, pd2}), expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}, Bootstraps: true}, want: Empty, safe: true, why: "bootstraps with the members of its --initial-cluster"},
		{name: "a member set to bootstrap (--initial-cluster-state=new) beside a live cluster that has not added it: a cluster of its own", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: healthy, expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}, Bootstraps: true}, want: Empty, why: "would bootstrap a separate cluster"},
		{name: "kubeadm's first master, wiped, its manifest still saying new: the live cluster knows it ran", report: nil,
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs, Bootstraps: true}, want: Empty, wiped: true, why: "this member ran before and its data is gone"},
		{name: "empty dir, nobody answered, no member named: nothing there to lose", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: answers([]etcdmedic.Member{pd0, pd1, pd2}), want: Empty, safe: true},
		{name: "kubeadm reset (incident 2, step 3): a started member's data dir wiped, the member not removed", report: &datadir.Report{Kind: datadir.KindEmpty},
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs}, want: Empty, wiped: true, why: "this member ran before and its data is gone"},
		{name: "a started member's data dir deleted, the member named only", report: nil,
			view: healthy, expect: Expect{Name: "pd-2"}, want: Empty, wiped: true, why: "tocommit(N) is out of range"},
		{name: "a bare db file given as --data-dir", report: &datadir.Report{Kind: datadir.KindDBFile}, view: healthy, want: Foreign, why: "bare db file"},
		{name: "data without its WAL (--wal-dir not given)", report: &datadir.Report{Kind: datadir.KindDataWithoutWAL, KindReason: "member/snap holds a db, but there is no member/wal"},
			view: healthy, want: Incomplete, why: "no member/wal"},
		{name: "a WAL dir without its data", report: &datadir.Report{Kind: datadir.KindWALWithoutData, KindReason: "the WAL dir holds .wal files, but the data dir has no member/snap/db"},
			view: healthy, want: Incomplete, why: "no member/snap/db"},
		{name: "the empty db a failed first start left, the member added: etcd bootstraps again on it", report: &datadir.Report{Kind: datadir.KindBootstrapLeftover},
			view: withPD3Added, expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, want: Empty, safe: true, why: "only the empty db a failed first start left"},
		{name: "the empty db a failed first start left, the member not added yet", report: &datadir.Report{Kind: datadir.KindBootstrapLeftover},
			view: healthy, expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, want: Empty, why: "no member of the live cluster has peer URLs " + newPeer},
		{name: "the empty db of a failed start on a started member's wiped data dir", report: &datadir.Report{Kind: datadir.KindBootstrapLeftover},
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs}, want: Empty, wiped: true, why: "this member ran before and its data is gone"},
		{name: "incident 1: PD failover onto a reused volume holding the removed pd-2's data", report: stalePD2,
			view: afterFailover, expect: Expect{Name: "pd-2", PeerURLs: []string{newPeer}}, want: Removed, movable: true, why: "permanently removed"},
		{name: "incident 1: the removed pd-2's data, which recorded its own removal", report: sawItsRemoval,
			view: afterFailover, expect: Expect{Name: "pd-2"}, want: Removed, movable: true, why: "member f2 is no longer in the live membership"},
		{name: "another cluster's data, same member names", report: member(datadir.KindEtcdMember, otherID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs}, want: Foreign, movable: true, why: "request cluster ID mismatch"},
		{name: "guard: another cluster's data on the volume of pd-1, which this cluster holds at its peer URLs", report: member(datadir.KindEtcdMember, otherID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs, Starts: true}, want: Foreign, movable: true, why: "request cluster ID mismatch"},
		{name: "guard: another cluster's data, pd-1 named only, and this cluster has a pd-1", report: member(datadir.KindEtcdMember, otherID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", Starts: true}, want: Foreign, movable: true, why: "request cluster ID mismatch"},
		{name: "guard given the wrong cluster's endpoints (same member names, not these peer URLs): never moved", report: member(datadir.KindEtcdMember, otherID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: []string{newPeer}, Starts: true}, want: Unknown, why: "the endpoints probed (http://10.0.0.10:2379,http://10.0.0.11:2379,http://10.0.0.12:2379) may be another cluster's"},
		{name: "guard without --name or --peer-urls, another cluster's data: the endpoints are not proven", report: member(datadir.KindEtcdMember, otherID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Starts: true}, want: Unknown, why: "Give this cluster's endpoints"},
		{name: "a member dir whose WAL names no cluster or member", report: &datadir.Report{Path: "/var/lib/etcd", Kind: datadir.KindEtcdMember},
			view: healthy, want: Unreadable, why: "cannot be told"},
		{name: "a live member's own data dir", report: member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs}, want: Valid, safe: true, why: "is live"},
		{name: "a live member's data, nothing expected (scan)", report: member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1"),
			view: healthy, want: Valid, safe: true},
		{name: "a live member's data under another member's name", report: member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-2", PeerURLs: pd1.PeerURLs}, want: Mismatched, why: `is named "pd-1", this member will start as "pd-2"`},
		{name: "a live member's data under other peer URLs", report: member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1"),
			view: healthy, expect: Expect{Name: "pd-1", PeerURLs: []string{newPeer}}, want: Mismatched, why: "this member will advertise " + newPeer},
		{name: "quorum lost (incident 2): this may be the most recent data", report: member(datadir.KindEtcdMember, liveID, pd2.ID, "pd-2"),
			view: answers([]etcdmedic.Member{pd0, pd1, pd2}, pd0), expect: Expect{Name: "pd-2"}, want: Unknown, why: "no quorum (1 of 3 voters up)"},
		{name: "no leader (an election)", report: stalePD2, view: noLeader(), expect: Expect{Name: "pd-2"}, want: Unknown, why: "no leader"},
		{name: "nobody answered", report: stalePD2, view: answers([]etcdmedic.Member{pd0, pd1, pd2}), want: Unknown, why: "no member of the live cluster answered"},
		{name: "no view at all", report: stalePD2, view: nil, want: Unknown, why: "no member of the live cluster answered"},
		{name: "nobody answered, not etcd's files: still not judged", report: notEtcd(t, "important.txt"), view: nil, want: Unknown, why: "does not guess"},
		{name: "a PD join file and nothing else: moved aside", report: notEtcd(t, "join"), view: healthy, want: Foreign, movable: true, why: "not etcd data"},
		{name: "files that are not etcd's (a wrong --data-dir): never moved", report: notEtcd(t, "important.txt", "join"), view: healthy, want: Foreign, why: "will not move them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Classify(tc.report, tc.view, tc.expect)
			if v.Class != tc.want || v.Safe != tc.safe || v.Movable != tc.movable {
				t.Errorf("got %s (safe %v, movable %v), want %s (safe %v, movable %v): %s", v.Class, v.Safe, v.Movable, tc.want, tc.safe, tc.movable, v.Reason)
			}
			if !strings.Contains(v.Reason, tc.why) {
				t.Errorf("reason %q does not say %q", v.Reason, tc.why)
			}
			if v.Evidence == nil {
				t.Error("no evidence list (JSON null)")
			}
			if (v.Class == Valid || v.Class == Mismatched || tc.wiped) != (v.LiveMember != nil) {
				t.Errorf("live member %+v for a %s data dir", v.LiveMember, v.Class)
			}
		})
	}
}

// Incident 1's evidence: what an operator sees about pd-2's stale volume.
func TestClassifyShowsTheEvidenceOfAStaleVolume(t *testing.T) {
	r := member(datadir.KindPDMember, liveID, pd2Old, "pd-2")
	r.PDJoin = &datadir.PDJoin{Contents: "pd-0=http://10.0.0.10:2380,pd-4=http://10.0.0.14:2380"}
	v := Classify(r, answers([]etcdmedic.Member{pd0, pd1}, pd0, pd1), Expect{Name: "pd-2"})
	seen := map[string]string{}
	for _, e := range v.Evidence {
		seen[e.What] = e.Value
	}
	for what, want := range map[string]string{
		"data dir cluster ID": "c1", "data dir member ID": "f2", "data dir member name": "pd-2",
		"data dir last raft index (term)": "850 (3)", "PD join file": "pd-4=http://10.0.0.14:2380",
		"live cluster ID": "c1", "live members": "pd-0=a0,pd-1=a1",
	} {
		if !strings.Contains(seen[what], want) {
			t.Errorf("evidence %q = %q, want %q", what, seen[what], want)
		}
	}
}

// A rolled-back copy of pd-1's own data (a VM snapshot restored: last index 8 while the
// cluster is at 900) is still VALID, as a member stopped normally is always behind; the
// evidence shows both positions side by side for the operator to compare.
func TestClassifyShowsTheLiveRaftIndexBesideTheDataDirs(t *testing.T) {
	r := member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1")
	r.Raft = &datadir.Raft{LastIndex: 8, LastTerm: 2}
	v := Classify(r, answers([]etcdmedic.Member{pd0, pd1, pd2}, pd0, pd2), Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs})
	if v.Class != Valid || !v.Safe {
		t.Fatalf("got %s (safe %v): %s", v.Class, v.Safe, v.Reason)
	}
	var whats []string
	for _, e := range v.Evidence {
		whats = append(whats, e.What+" = "+e.Value)
	}
	i := slices.Index(whats, "data dir last raft index (term) = 8 (2)")
	if i < 0 || i+1 >= len(whats) || whats[i+1] != "live raft index (term) = 900 (3), leader pd-0 (a0)" {
		t.Errorf("evidence %q: want the live raft index right after the data dir's", whats)
	}
}
