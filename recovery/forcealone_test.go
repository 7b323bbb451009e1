package recovery

import (
	"encoding/json"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// writeBootstrappedLog writes the WAL of member 1 of a cluster bootstrapped with members 1, 2
// and 3 (etcd's first three entries: one ConfChange adding each), then puts up to last, with
// the commit index at commit.
func writeBootstrappedLog(t *testing.T, last, commit uint64) string {
	t.Helper()
	terms := make([]uint64, last)
	for i := range terms {
		terms[i] = 2
	}
	ents := puts(terms...)
	for i := range uint64(3) {
		id := i + 1
		ctx, _ := json.Marshal(map[string]any{"id": id, "peerURLs": []string{fmt.Sprintf("http://127.0.0.1:238%d", id)}})
		data, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: &id, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		ents[i].Type, ents[i].Data = raftpb.EntryConfChange.Enum(), data
	}
	return writeMemberWAL(t, ents, commit)
}

// What etcd reads at its next start: the ConfChanges after the puts, and the commit index.
func readTail(t *testing.T, dataDir string) (commit uint64, changes []string) {
	t.Helper()
	st, ents := readWAL(t, dataDir)
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
	if _, err := forceAlone(dataDir, ""); err == nil {
		t.Fatal("left alone with 8 entries past its commit index: the whole log must be committed first")
	}
	if _, _, err := commitWholeLog(dataDir, ""); err != nil {
		t.Fatal(err)
	}
	removed, err := forceAlone(dataDir, "")
	if err != nil || len(removed) != 2 || removed[0] != 2 || removed[1] != 3 {
		t.Fatalf("removed %v (%v), want members 2 and 3", removed, err)
	}
	commit, changes := readTail(t, dataDir)
	if commit != 22 || len(changes) != 2 || changes[0] != "ConfChangeRemoveNode 2" || changes[1] != "ConfChangeRemoveNode 3" {
		t.Fatalf("the WAL ends with %v, commit index %d; want the removals of 2 and 3 at 21 and 22, committed", changes, commit)
	}
	// Run again (a resumed recovery): it is alone already.
	if removed, err := forceAlone(dataDir, ""); err != nil || len(removed) != 0 {
		t.Fatalf("again: removed %v (%v)", removed, err)
	}
	if again, changes := readTail(t, dataDir); again != 22 || len(changes) != 2 {
		t.Fatalf("again: commit %d, changes %v", again, changes)
	}
}
