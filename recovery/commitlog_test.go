package recovery

import (
	"errors"
	"os"
	"time"

	"path/filepath"
	"testing"

	"github.com/etcdmedic/etcdmedic/datadir"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// writeMemberWAL writes the WAL of member 1 of cluster 7 with the entries given (index 1, 2,
// ...), one at a time, each followed by a HardState whose commit index reaches commit: what a
// follower holds after a power cut dropped its unsynced commit index.
func writeMemberWAL(t *testing.T, ents []*raftpb.Entry, commit uint64) string {
	t.Helper()
	dataDir := t.TempDir()
	walDir := filepath.Join(dataDir, "member", "wal")
	if err := os.MkdirAll(filepath.Join(dataDir, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	node, cluster := uint64(1), uint64(7)
	meta, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &node, ClusterID: &cluster})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zap.NewNop(), walDir, meta)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ents {
		index, vote, c := uint64(i+1), uint64(1), min(uint64(i+1), commit)
		e.Index = &index
		if err := w.Save(&raftpb.HardState{Term: e.Term, Vote: &vote, Commit: &c}, []*raftpb.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dataDir
}

// puts are entries of the terms given, each a put.
func puts(terms ...uint64) []*raftpb.Entry {
	var ents []*raftpb.Entry
	for _, term := range terms {
		ents = append(ents, &raftpb.Entry{Term: &term, Data: []byte("put")})
	}
	return ents
}

// writeLog writes a log of last puts of term 2, committed up to commit.
func writeLog(t *testing.T, last, commit uint64) string {
	t.Helper()
	terms := make([]uint64, last)
	for i := range terms {
		terms[i] = 2
	}
	return writeMemberWAL(t, puts(terms...), commit)
}

// readWAL reads the WAL as etcd will at its next start, with etcd's own wal package.
func readWAL(t *testing.T, dataDir string) (*raftpb.HardState, []*raftpb.Entry) {
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
	return st, ents
}

func readCommit(t *testing.T, dataDir string) (commit uint64, entries int) {
	t.Helper()
	st, ents := readWAL(t, dataDir)
	return st.GetCommit(), len(ents)
}

func TestCommitWholeLogKeepsEveryEntry(t *testing.T) {
	dataDir := writeLog(t, 10, 4)
	before, after, err := commitWholeLog(dataDir, "")
	if err != nil || before != 4 || after != 10 {
		t.Fatalf("commit %d -> %d (%v), want 4 -> 10", before, after, err)
	}
	if commit, n := readCommit(t, dataDir); commit != 10 || n != 10 {
		t.Fatalf("read back commit %d with %d entries, want 10 and 10", commit, n)
	}
	// Run again (a resumed recovery): nothing to do.
	if before, after, err := commitWholeLog(dataDir, ""); err != nil || before != 10 || after != 10 {
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
	before, after, err := commitWholeLog(dataDir, "")
	if err != nil || after < before || after == 0 {
		t.Fatalf("commit after a torn tail: %d -> %d (%v)", before, after, err)
	}
	if commit, n := readCommit(t, dataDir); commit != after || uint64(n) != after {
		t.Fatalf("read back commit %d with %d entries, want every entry before the torn one committed (%d)", commit, n, after)
	}
}

// A WAL whose term goes down (entries 9 and 10 of term 1 after term 3) is not a raft log from
// entry 9 on: inspect stops there, the survivor's log is cut before it, and the rest committed.
func TestAnInvalidLogTailIsCutThenCommitted(t *testing.T) {
	dataDir := writeMemberWAL(t, puts(2, 2, 2, 2, 3, 3, 3, 3, 1, 1), 5)
	from, where, err := cutInvalidTail(dataDir, "")
	if err != nil || from != 9 || where == "" {
		t.Fatalf("cut from %d (%s, %v), want from entry 9", from, where, err)
	}
	before, after, err := commitWholeLog(dataDir, "")
	if err != nil || before != 5 || after != 8 {
		t.Fatalf("commit %d -> %d (%v), want 5 -> 8", before, after, err)
	}
	if commit, n := readCommit(t, dataDir); commit != 8 || n != 8 {
		t.Fatalf("etcd's wal reads commit %d with %d entries, want 8 and 8", commit, n)
	}
	if from, _, err := cutInvalidTail(dataDir, ""); err != nil || from != 0 {
		t.Fatalf("again: cut from %d (%v), want nothing", from, err)
	}
}

// What a WAL's end means for a survivor, one row per case.
func TestWALTailJudgement(t *testing.T) {
	for name, tt := range map[string]struct {
		tail        *datadir.TailProblem
		commit      uint64
		damage, cut bool
	}{
		"clean end":                     {nil, 10, false, false},
		"torn last record":              {&datadir.TailProblem{Kind: "torn-write"}, 10, false, false},
		"invalid past the commit index": {&datadir.TailProblem{Kind: "invalid-log", InvalidFrom: 11, Newest: true}, 10, false, true},
		"invalid at the commit index":   {&datadir.TailProblem{Kind: "invalid-log", InvalidFrom: 10, Newest: true}, 10, true, false},
		"invalid in a sealed segment":   {&datadir.TailProblem{Kind: "invalid-log", InvalidFrom: 11}, 10, true, false},
		"a CRC mismatch mid-log":        {&datadir.TailProblem{Kind: "crc-mismatch"}, 10, true, false},
	} {
		damage, cut := walTail(tt.tail, tt.commit)
		if (damage != "") != tt.damage || (cut != "") != tt.cut {
			t.Errorf("%s: damage %q, cut %q", name, damage, cut)
		}
	}
}

// A WAL this process has just closed can stay locked a moment by a child forked at that
// instant: the read back waits it out, and still names a lock that stays.
func TestReadBackWaitsOutALockOfAMoment(t *testing.T) {
	dataDir := writeLog(t, 3, 3)
	segs, err := filepath.Glob(filepath.Join(dataDir, "member", "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no WAL segment: %v", err)
	}
	newest := segs[len(segs)-1]
	held, err := fileutil.TryLockFile(newest, os.O_RDWR, fileutil.PrivateFileMode)
	if err != nil {
		t.Fatal(err)
	}
	released := time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	defer released.Stop()
	if r, err := readBack(dataDir, datadir.Options{}); err != nil || r.Raft == nil || r.Raft.LastIndex != 3 {
		t.Fatalf("read back after a lock of 300 ms: %v", err)
	}

	stays, err := fileutil.TryLockFile(newest, os.O_RDWR, fileutil.PrivateFileMode)
	if err != nil {
		t.Fatal(err)
	}
	defer stays.Close()
	if _, err := readBack(dataDir, datadir.Options{}); !errors.Is(err, datadir.ErrLocked) {
		t.Fatalf("read back under a lock that stays: %v, want %v", err, datadir.ErrLocked)
	}
}
