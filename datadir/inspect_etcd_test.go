package datadir_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/etcdmedic/etcdmedic"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// liveView is what the running cluster said about itself just before it was stopped: the
// truth inspect's offline reading must match.
type liveView struct {
	clusterID uint64
	members   map[uint64]liveMember
	status    map[string]memberStatus // by member name
}

type liveMember struct {
	name      string
	peerURLs  []string
	isLearner bool
}

type memberStatus struct {
	revision     int64
	raftTerm     uint64
	raftIndex    uint64
	appliedIndex uint64
	dbSize       int64
}

// grownCluster is the runbook every version goes through: one member, then two more added as
// learners and promoted one at a time (the sequence that leaves v3.5.19's backend wrong),
// writes before and after, then a clean stop.
func grownCluster(t *testing.T, version string, snapshotCount int) (*etcdtest.Cluster, liveView) {
	t.Helper()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: version, SnapshotCount: snapshotCount})
	cli := c.Client(t)
	put := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("%s/%03d", prefix, i), "v")
			cancel()
			if err != nil {
				t.Fatalf("put: %v", err)
			}
		}
	}
	put("before", 60)
	for _, name := range []string{"m2", "m3"} {
		m := c.AddMember(t, name, etcdtest.AddOptions{Learner: true})
		c.PromoteMember(t, m)
		put("after-"+name, 30)
	}
	live := liveView{members: map[uint64]liveMember{}, status: map[string]memberStatus{}}
	for _, m := range c.MemberList(t) {
		live.members[m.ID] = liveMember{name: m.Name, peerURLs: m.PeerURLs, isLearner: m.IsLearner}
	}
	// Stop followers first, then the leader: with quorum gone no entry is appended after the
	// statuses below were taken.
	leader := c.Leader(t)
	var order []*etcdtest.Member
	for _, m := range c.Members() {
		if m != leader {
			order = append(order, m)
		}
	}
	order = append(order, leader)
	for _, m := range c.Members() {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		st, err := m.Status(ctx)
		cancel()
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name, err)
		}
		live.clusterID = st.Header.ClusterId
		live.status[m.Name] = memberStatus{revision: st.Header.Revision, raftTerm: st.RaftTerm, raftIndex: st.RaftIndex, appliedIndex: st.RaftAppliedIndex, dbSize: st.DbSize}
	}
	for _, m := range order {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	return c, live
}

// TestInspectMatchesLiveCluster checks every field inspect reports against what the live
// cluster said, on each etcd version users run, and that inspect changes no byte.
func TestInspectMatchesLiveCluster(t *testing.T) {
	t.Parallel()
	for _, version := range []string{etcdtest.V3_5_19, etcdtest.V3_5_21, etcdtest.V3_5_24, etcdtest.V3_6, etcdtest.Linked} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			c, live := grownCluster(t, version, 25) // a low --snapshot-count, so a .snap exists
			for _, m := range c.Members() {
				if r, _ := datadir.Inspect(m.DataDir, datadir.Options{}); r == nil || r.Raft.Snapshot == nil {
					t.Errorf("%s: want a .snap with --snapshot-count=25", m.Name)
				}
				before := treeDigest(t, m.DataDir)
				r, err := datadir.Inspect(m.DataDir, datadir.Options{Deep: m.Name == "m1"})
				if err != nil {
					t.Fatalf("inspect %s: %v", m.Name, err)
				}
				if after := treeDigest(t, m.DataDir); after != before {
					t.Fatalf("inspect changed %s", m.DataDir)
				}
				checkAgainstLive(t, r, m, live)
				if m.Name == "m1" && r.Backend.Deep == nil {
					t.Errorf("m1: --deep gave no deep check")
				}
				fs := finding.ForDataDir(r)
				drift := findingsWithID(fs, finding.IDMembershipDrift)
				if version == etcdtest.V3_5_19 {
					// Incident 3: both promoted learners are still learners in the v3 backend.
					for _, name := range []string{"m2", "m3"} {
						f := findingFor(drift, name)
						if f == nil || f.Severity != finding.Critical || !strings.Contains(evidenceText(f), "isLearner") {
							t.Errorf("%s: want a critical isLearner drift for %s, got %+v", m.Name, name, drift)
						}
					}
					if f := findingFor(drift, "m1"); f != nil && f.Severity == finding.Critical {
						t.Errorf("m1 was never a learner, yet: %+v", f)
					}
				} else if len(drift) > 0 {
					t.Errorf("%s on %s: want no membership drift, got %+v", m.Name, version, drift)
				}
				db, err := datadir.Inspect(filepath.Join(m.DataDir, "member", "snap", "db"), datadir.Options{})
				if err != nil || db.Backend.Revision != r.Backend.Revision {
					t.Errorf("%s: inspect of the bare db: %v", m.Name, err)
				} else if dbDrift := findingsWithID(finding.ForDataDir(db), finding.IDMembershipDrift); (version == etcdtest.V3_5_19) != (len(dbDrift) > 0) {
					t.Errorf("%s on %s: bare db drift findings %+v", m.Name, version, dbDrift)
				}
				for _, f := range fs {
					if f.ID != finding.IDMembershipDrift {
						t.Errorf("%s: unexpected finding %s: %s", m.Name, f.ID, f.Summary)
					}
				}
			}
		})
	}
}

// TestIncident3DriftBlocksV36 reproduces incident 3 with real binaries: v3.5.19 leaves promoted
// learners marked as learners in its backend; inspect reports it from the WAL alone (no .snap
// yet), and etcd v3.6 then refuses to start on the data dir. With a .snap taken after the
// promotions, v3.6 repairs the flags itself from the snapshot (etcd #19636) and starts.
func TestIncident3DriftBlocksV36(t *testing.T) {
	t.Parallel()
	c, live := grownCluster(t, etcdtest.V3_5_19, 0)
	m1 := c.Member("m1")
	r, err := datadir.Inspect(m1.DataDir, datadir.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Raft.Snapshot != nil {
		t.Fatalf("want no .snap with the default --snapshot-count, got %+v", r.Raft.Snapshot)
	}
	checkAgainstLive(t, r, m1, live)
	drift := findingsWithID(finding.ForDataDir(r), finding.IDMembershipDrift)
	for _, name := range []string{"m2", "m3"} {
		if f := findingFor(drift, name); f == nil || f.Severity != finding.Critical {
			t.Errorf("want a critical drift finding for %s, got %+v", name, drift)
		}
	}
	// A bare db (what `etcdctl snapshot save` gives) shows it too: v3 records against raft.
	db, err := datadir.Inspect(filepath.Join(m1.DataDir, "member", "snap", "db"), datadir.Options{})
	if err != nil || db.Kind != datadir.KindDBFile {
		t.Fatalf("inspect the db file: %v %+v", err, db)
	}
	dbDrift := findingsWithID(finding.ForDataDir(db), finding.IDMembershipDrift)
	for _, name := range []string{"m2", "m3"} {
		// v3.5.19 also never wrote the names of members added at runtime: match by ID.
		if f := findingFor(dbDrift, fmt.Sprintf("%x", c.Member(name).ID)); f == nil || f.Severity != finding.Critical || !strings.Contains(evidenceText(f), "raft confState=voter") {
			t.Errorf("db file: want a critical drift against raft for %s, got %+v", name, dbDrift)
		}
	}
	if err := m1.RestartWith(etcdtest.V3_6, nil); err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		m1.WaitExit(ctx)
	}
	if log := m1.LogTail(300); !strings.Contains(log, "too many learner members in cluster") {
		t.Errorf("etcd v3.6 on v3.5.19 data: want \"too many learner members in cluster\", log:\n%s", m1.LogTail(15))
	}
}

func checkAgainstLive(t *testing.T, r *datadir.Report, m *etcdtest.Member, live liveView) {
	t.Helper()
	if r.Kind != datadir.KindEtcdMember {
		t.Errorf("%s: kind %s, want %s", m.Name, r.Kind, datadir.KindEtcdMember)
	}
	id := r.Identity
	if uint64(id.ClusterID) != live.clusterID || uint64(id.MemberID) != m.ID {
		t.Errorf("%s: identity cluster %s member %s, live said cluster %x member %x", m.Name, id.ClusterID, id.MemberID, live.clusterID, m.ID)
	}
	if id.Name != m.Name || !slices.Equal(id.PeerURLs, []string{m.PeerURL}) || !id.InMembership || id.RemovedMarked {
		t.Errorf("%s: identity %+v", m.Name, id)
	}
	st := live.status[m.Name]
	hs := r.Raft.HardState
	if hs.Term != st.raftTerm {
		t.Errorf("%s: HardState term %d, live raft term %d", m.Name, hs.Term, st.raftTerm)
	}
	if hs.Commit < st.raftIndex || r.Raft.LastIndex < hs.Commit {
		t.Errorf("%s: commit %d last index %d, live raft index %d", m.Name, hs.Commit, r.Raft.LastIndex, st.raftIndex)
	}
	if s := r.Raft.Snapshot; s != nil && (r.Raft.FirstIndex != s.Index+1 || len(s.ConfState.Voters) == 0) {
		t.Errorf("%s: first index %d, snapshot %+v", m.Name, r.Raft.FirstIndex, s)
	}
	if r.Raft.Tail != nil || r.Raft.WALSegments < 1 || r.Raft.WALBytes <= 0 {
		t.Errorf("%s: WAL %d segments %d bytes tail %+v", m.Name, r.Raft.WALSegments, r.Raft.WALBytes, r.Raft.Tail)
	}
	be := r.Backend
	if be == nil {
		t.Fatalf("%s: backend unreadable: %s", m.Name, r.BackendError)
	}
	if be.Revision != st.revision {
		t.Errorf("%s: revision %d, live %d", m.Name, be.Revision, st.revision)
	}
	if be.ConsistentIndex < st.appliedIndex || be.ConsistentIndex > hs.Commit {
		t.Errorf("%s: consistent index %d, live applied %d, commit %d", m.Name, be.ConsistentIndex, st.appliedIndex, hs.Commit)
	}
	if be.SizeBytes <= 0 || be.SizeBytes > be.FileBytes || be.SizeBytes < st.dbSize/2 {
		t.Errorf("%s: db size %d (file %d), live db size %d", m.Name, be.SizeBytes, be.FileBytes, st.dbSize)
	}
	if be.ClusterVersion == "" || len(be.Alarms) != 0 {
		t.Errorf("%s: cluster version %q alarms %v", m.Name, be.ClusterVersion, be.Alarms)
	}
	if be.ConfState == nil || len(be.ConfState.Voters) != 3 || len(be.ConfState.Learners) != 0 {
		t.Errorf("%s: backend confState %+v, want 3 voters", m.Name, be.ConfState)
	}
	if be.Deep != nil {
		if len(be.Deep.PageErrors) != 0 || be.Deep.Keys < 120 || be.Deep.SizeInUseBytes <= 0 || be.Deep.SizeInUseBytes > be.SizeBytes {
			t.Errorf("%s: deep check %+v", m.Name, be.Deep)
		}
	}
	// The v2 store is what v3.5 serves in `member list`: it must match it exactly.
	ms := r.Membership
	if len(ms.V2) != len(live.members) || len(ms.V3) != len(live.members) {
		t.Errorf("%s: v2 has %d members, v3 %d, live %d", m.Name, len(ms.V2), len(ms.V3), len(live.members))
	}
	for liveID, lm := range live.members {
		v2 := etcdmedic.Find(ms.V2, etcdmedic.ID(liveID))
		if v2 == nil || v2.Name != lm.name || !slices.Equal(v2.PeerURLs, lm.peerURLs) || v2.IsLearner != lm.isLearner {
			t.Errorf("%s: v2 record of %x = %+v, live %+v", m.Name, liveID, v2, lm)
		}
		if etcdmedic.Find(ms.V3, etcdmedic.ID(liveID)) == nil {
			t.Errorf("%s: v3 backend has no record of %x", m.Name, liveID)
		}
	}
}

func findingsWithID(fs []finding.Finding, id string) []finding.Finding {
	var out []finding.Finding
	for _, f := range fs {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func findingFor(fs []finding.Finding, name string) *finding.Finding {
	for i := range fs {
		if strings.HasPrefix(fs[i].Subject, name+" ") || fs[i].Subject == name {
			return &fs[i]
		}
	}
	return nil
}

func evidenceText(f *finding.Finding) string {
	var b strings.Builder
	for _, e := range f.Evidence {
		b.WriteString(e.What + "=" + e.Value + ";")
	}
	return b.String()
}

// treeDigest hashes every file's path, mode, size, mtime and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d %d\n", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
