package recovery

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// writeBootstrappedLog writes the WAL of member 1 of a cluster bootstrapped with members 1, 2
// and 3 (etcd's first three entries: one ConfChange adding each), then puts up to last, with
// the commit index at commit.
func writeBootstrappedLog(t *testing.T, last, commit uint64) string {
	t.Helper()
	dataDir := t.TempDir()
	walDir := filepath.Join(dataDir, "member", "wal")
	if err := os.MkdirAll(filepath.Join(dataDir, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	node, clusterID := uint64(1), uint64(7)
	meta, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &node, ClusterID: &clusterID})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zap.NewNop(), walDir, meta)
	if err != nil {
		t.Fatal(err)
	}
	var ents []*raftpb.Entry
	for i := uint64(1); i <= last; i++ {
		index, term := i, uint64(2)
		e := &raftpb.Entry{Index: &index, Term: &term, Data: []byte("put")}
		if i <= 3 {
			id := i
			ctx, _ := json.Marshal(map[string]any{"id": id, "peerURLs": []string{"http://127.0.0.1:238" + string(rune('0'+i))}})
			cc := &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: &id, Context: ctx}
			data, err := proto.Marshal(cc)
			if err != nil {
				t.Fatal(err)
			}
			e.Type, e.Data = raftpb.EntryConfChange.Enum(), data
		}
		ents = append(ents, e)
	}
	term, vote := uint64(2), uint64(1)
	if err := w.Save(&raftpb.HardState{Term: &term, Vote: &vote, Commit: &commit}, ents); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dataDir
}

// What etcd reads at its next start: the ConfChanges after the puts, and the commit index.
func readTail(t *testing.T, dataDir string) (commit uint64, changes []string) {
	t.Helper()
	r, err := wal.OpenForRead(zap.NewNop(), filepath.Join(dataDir, "member", "wal"), &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, st, ents, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents[3:] {
		if e.GetType() == raftpb.EntryConfChange {
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				t.Fatal(err)
			}
			changes = append(changes, cc.GetType().String()+" "+string(rune('0'+cc.GetNodeId())))
		}
	}
	return st.GetCommit(), changes
}

// The runbook's --force-new-cluster, done on disk while the member is stopped: the same
// removals etcd would append at start, committed, and nothing more on a second run.
func TestForceAloneAppendsWhatForceNewClusterWould(t *testing.T) {
	dataDir := writeBootstrappedLog(t, 20, 12)
	if _, err := forceAlone(dataDir); err == nil {
		t.Fatal("left alone with 8 entries past its commit index: the whole log must be committed first")
	}
	if _, _, err := commitWholeLog(dataDir); err != nil {
		t.Fatal(err)
	}
	removed, err := forceAlone(dataDir)
	if err != nil || len(removed) != 2 || removed[0] != 2 || removed[1] != 3 {
		t.Fatalf("removed %v (%v), want members 2 and 3", removed, err)
	}
	commit, changes := readTail(t, dataDir)
	if commit != 22 || len(changes) != 2 || changes[0] != "ConfChangeRemoveNode 2" || changes[1] != "ConfChangeRemoveNode 3" {
		t.Fatalf("the WAL ends with %v, commit index %d; want the removals of 2 and 3 at 21 and 22, committed", changes, commit)
	}
	// Run again (a resumed recovery): it is alone already.
	if removed, err := forceAlone(dataDir); err != nil || len(removed) != 0 {
		t.Fatalf("again: removed %v (%v)", removed, err)
	}
	if again, changes := readTail(t, dataDir); again != 22 || len(changes) != 2 {
		t.Fatalf("again: commit %d, changes %v", again, changes)
	}
}
