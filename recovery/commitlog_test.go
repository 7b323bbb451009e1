package recovery

import (
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

// writeLog writes a member's WAL with entries 1..last of term 2, and a HardState committing
// only up to commit: what a follower holds after a power cut dropped its unsynced commit index.
func writeLog(t *testing.T, last, commit uint64) string {
	t.Helper()
	dataDir := t.TempDir()
	walDir := filepath.Join(dataDir, "member", "wal")
	if err := os.MkdirAll(filepath.Join(dataDir, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	node, cluster := uint64(1), uint64(2)
	meta, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &node, ClusterID: &cluster})
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
		ents = append(ents, &raftpb.Entry{Index: &index, Term: &term, Data: []byte("put")})
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

func readCommit(t *testing.T, dataDir string) (commit uint64, entries int) {
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
	return st.GetCommit(), len(ents)
}

func TestCommitWholeLogKeepsEveryEntry(t *testing.T) {
	dataDir := writeLog(t, 10, 4)
	before, after, err := commitWholeLog(dataDir)
	if err != nil || before != 4 || after != 10 {
		t.Fatalf("commit %d -> %d (%v), want 4 -> 10", before, after, err)
	}
	if commit, n := readCommit(t, dataDir); commit != 10 || n != 10 {
		t.Fatalf("read back commit %d with %d entries, want 10 and 10", commit, n)
	}
	// Run again (a resumed recovery): nothing to do.
	if before, after, err := commitWholeLog(dataDir); err != nil || before != 10 || after != 10 {
		t.Fatalf("again: %d -> %d (%v)", before, after, err)
	}
}

// A torn last record (a crash in the middle of a write) is cut, as etcd does at start: the
// entries before it are kept and committed.
func TestCommitWholeLogRepairsATornTail(t *testing.T) {
	dataDir := writeLog(t, 10, 4)
	segs, _ := filepath.Glob(filepath.Join(dataDir, "member", "wal", "*.wal"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The segment is preallocated: find the end of the records and cut the file inside the
	// last one, as a crash mid-write leaves it.
	st, _ := f.Stat()
	buf := make([]byte, st.Size())
	f.ReadAt(buf, 0)
	end := len(buf)
	for end > 0 && buf[end-1] == 0 {
		end--
	}
	if err := f.Truncate(int64(end - 5)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, after, err := commitWholeLog(dataDir)
	if err != nil || after < before || after == 0 {
		t.Fatalf("commit after a torn tail: %d -> %d (%v)", before, after, err)
	}
	if commit, n := readCommit(t, dataDir); commit != after || uint64(n) != after {
		t.Fatalf("read back commit %d with %d entries, want every entry before the torn one committed (%d)", commit, n, after)
	}
}
