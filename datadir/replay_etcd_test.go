package datadir_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"

	. "github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
)

// A member killed right after it published its name (or after a member add): the entry is in
// the WAL and applied to the backend, but the last HardState on disk still has an older commit
// (a HardState whose only change is the commit is not fsynced). The v2 store is replayed up to
// max(commit, consistent index), as etcd does, so no false membership-drift is reported. It was
// replayed up to the commit only, and m1 had no name in v2 (review item 11; incident 3's
// finding).
func TestInspectReplaysV2UpToTheConsistentIndex(t *testing.T) {
	t.Parallel()
	dir := stoppedMember(t)
	before, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var publish uint64
	for _, c := range before.Membership.Changes {
		if c.Kind == ChangeSetAttributes {
			publish = c.Index
		}
	}
	if publish == 0 || before.Backend == nil || before.Backend.ConsistentIndex <= publish {
		t.Fatalf("the fixture should hold m1's publish below its consistent index: changes %+v, backend %+v", before.Membership.Changes, before.Backend)
	}
	// The HardState a kill leaves: etcd's own WAL code appends it, its commit just below the
	// publish entry.
	hs := before.Raft.HardState
	saveHardState(t, dir, &raftpb.HardState{Term: proto.Uint64(hs.Term), Vote: proto.Uint64(uint64(hs.Vote)), Commit: proto.Uint64(publish - 1)})

	r, err := Inspect(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Raft.HardState.Commit != publish-1 {
		t.Fatalf("the WAL's HardState commit is %d, want %d", r.Raft.HardState.Commit, publish-1)
	}
	ms := r.Membership
	if ms.V2ReplayedTo != r.Backend.ConsistentIndex || ms.V2ReplayBound != "consistent index" {
		t.Errorf("v2 replayed to %d (%s), want the consistent index %d", ms.V2ReplayedTo, ms.V2ReplayBound, r.Backend.ConsistentIndex)
	}
	if len(ms.V2) != 1 || ms.V2[0].Name != "m1" || len(ms.V2[0].ClientURLs) == 0 {
		t.Errorf("v2 should hold m1's published name and client URLs: %+v", ms.V2)
	}
	if drift := findingsWithID(finding.ForDataDir(r), finding.IDMembershipDrift); len(drift) > 0 {
		t.Errorf("no drift: both stores hold what was applied, got %+v", drift)
	}
}

// saveHardState appends a HardState record to a stopped member's WAL with etcd's WAL code.
func saveHardState(t *testing.T, dir string, hs *raftpb.HardState) {
	t.Helper()
	w, err := wal.Open(zap.NewNop(), filepath.Join(dir, "member", "wal"), &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, _, err := w.ReadAll(); err != nil {
		t.Fatal(err)
	}
	if err := w.Save(hs, nil); err != nil {
		t.Fatal(err)
	}
}
