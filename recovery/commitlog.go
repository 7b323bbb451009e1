package recovery

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/datadir"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// commitWholeLog makes every entry of a stopped member's log committed, by Raft's rule: the
// most up-to-date log holds every entry the old cluster committed that reached any survivor,
// and the entries in it that were never committed belong to requests whose clients saw no
// success, so committing them keeps the history linearizable. --force-new-cluster alone keeps
// only the entries up to max(HardState.commit, consistent index) and discards the rest
// ("discarding uncommitted WAL entries"); etcd does not even fsync a HardState whose only
// change is the commit index, so after a power cut the commit index on disk can be far behind.
//
// It appends, with etcd's own wal package, a HardState whose Commit is the last index, fsyncs
// it and reads it back. A torn last record is repaired first, as etcd does at start. It returns
// the commit index before and after; run again, it changes nothing.
func commitWholeLog(dataDir, walDir string) (before, after uint64, err error) {
	lg := zap.NewNop()
	opts := datadir.Options{WALDir: walDir}
	walDir = walDirOf(dataDir, walDir)
	r, err := datadir.Inspect(dataDir, opts)
	if err != nil || r.Raft == nil {
		return 0, 0, fmt.Errorf("read the WAL in %s: %v", walDir, err)
	}
	before, last := r.Raft.HardState.Commit, r.Raft.LastIndex
	if before >= last {
		return before, before, nil
	}
	w, err := openAtTail(lg, walDir, r.Raft.Segments, last)
	if err != nil {
		return before, 0, err
	}
	w.state.Commit = &last
	if err := w.wal.Save(w.state, nil); err != nil {
		w.wal.Close()
		return before, 0, fmt.Errorf("append the HardState to the WAL in %s: %w", walDir, err)
	}
	// A HardState whose only change is the commit index is not synced by Save.
	if err := w.wal.Sync(); err != nil {
		w.wal.Close()
		return before, 0, fmt.Errorf("sync the WAL in %s: %w", walDir, err)
	}
	if err := w.wal.Close(); err != nil {
		return before, 0, err
	}
	back, err := readBack(dataDir, opts)
	if err != nil || back.Raft == nil {
		return before, 0, fmt.Errorf("read back the WAL in %s: %v", walDir, err)
	}
	if back.Raft.HardState.Commit != last || back.Raft.LastIndex != last {
		return before, 0, fmt.Errorf("the WAL in %s reads back commit index %d and last index %d, not the %d written", walDir, back.Raft.HardState.Commit, back.Raft.LastIndex, last)
	}
	return before, last, nil
}

// readBack inspects a data dir whose WAL this process has just written and closed. A lock of
// the closed WAL can outlive its Close for a moment: a child forked by another goroutine at
// that instant shares the open file description, and its lock, until it execs (seen in the
// tests, which run the commands in-process beside many others that start processes). So a
// locked WAL is read again for up to readBackWait before it counts as held by another process.
func readBack(dataDir string, opts datadir.Options) (*datadir.Report, error) {
	deadline := time.Now().Add(readBackWait)
	for {
		r, err := datadir.Inspect(dataDir, opts)
		if !errors.Is(err, datadir.ErrLocked) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readBackWait bounds how long readBack waits for a lock of its own process to go.
const readBackWait = 2 * time.Second

// openAtTail opens the WAL for appending, reading only its newest segment when that holds the
// end of the log (a segment starts with the HardState, and etcd reads a 1 GiB WAL in seconds),
// else all of it from the newest snapshot. Either way the log's last index must be last.
func openAtTail(lg *zap.Logger, walDir string, segs []datadir.WALSegment, last uint64) (*openedWAL, error) {
	if n := len(segs); n > 0 {
		start := segs[n-1].Index
		w, end, err := openForAppend(lg, walDir, &walpb.Snapshot{Index: &start})
		if err == nil && end == last {
			return w, nil
		}
		if err == nil {
			w.wal.Close() // an entry rewritten below the segment's start: read it all
		}
	}
	walsnap, err := newestSnapshot(lg, walDir, filepath.Join(filepath.Dir(walDir), "snap"))
	if err != nil {
		return nil, err
	}
	w, end, err := openForAppend(lg, walDir, walsnap)
	if err != nil {
		return nil, err
	}
	if end != last {
		w.wal.Close()
		return nil, fmt.Errorf("the WAL in %s ends at index %d read by etcd's wal package, at %d read by etcdmedic: not appending", walDir, end, last)
	}
	return w, nil
}

type openedWAL struct {
	wal   *wal.WAL
	state *raftpb.HardState
}

// openForAppend opens the WAL at walsnap for writing, reads it all (repairing a torn last
// record once, as etcd does at start) and returns it with its HardState and last index.
func openForAppend(lg *zap.Logger, walDir string, walsnap *walpb.Snapshot) (*openedWAL, uint64, error) {
	for repaired := false; ; repaired = true {
		w, err := wal.Open(lg, walDir, walsnap)
		if err != nil {
			return nil, 0, fmt.Errorf("open the WAL in %s: %w", walDir, err)
		}
		_, st, ents, err := w.ReadAll()
		if err == nil {
			last := walsnap.GetIndex()
			if len(ents) > 0 {
				last = ents[len(ents)-1].GetIndex()
			}
			return &openedWAL{wal: w, state: st}, last, nil
		}
		w.Close()
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, fmt.Errorf("read the WAL in %s: %w", walDir, err)
		}
		if !wal.Repair(lg, walDir) {
			return nil, 0, fmt.Errorf("repair the torn end of the WAL in %s: %w", walDir, err)
		}
	}
}

// newestSnapshot is the snapshot etcd would start from: the newest .snap file the WAL records.
func newestSnapshot(lg *zap.Logger, walDir, snapDir string) (*walpb.Snapshot, error) {
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return nil, fmt.Errorf("list the snapshots the WAL in %s records: %w", walDir, err)
	}
	s, err := snap.New(lg, snapDir).LoadNewestAvailable(walSnaps)
	if errors.Is(err, snap.ErrNoSnapshot) {
		return &walpb.Snapshot{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load the newest snapshot in %s: %w", snapDir, err)
	}
	index, term := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
	return &walpb.Snapshot{Index: &index, Term: &term}, nil
}

// cutInvalidTail cuts the WAL of a stopped member before the first entry that breaks the raft
// log (datadir's "invalid-log" tail), when that is in the newest segment past the commit
// index: the segment is truncated at that record's start, as etcd's wal.Repair truncates a torn
// record, and read back. The bytes cut stay in the member's backup, taken before. It returns
// the first index cut and where, or 0 when the log is valid.
func cutInvalidTail(dataDir, walDir string) (from uint64, where string, err error) {
	opts := datadir.Options{WALDir: walDir}
	r, err := datadir.Inspect(dataDir, opts)
	if err != nil || r.Raft == nil {
		return 0, "", fmt.Errorf("read the WAL of %s: %v", dataDir, err)
	}
	t := r.Raft.Tail
	if t == nil || t.Kind != "invalid-log" {
		return 0, "", nil
	}
	if damage, _ := walTail(t, r.Raft.HardState.Commit); damage != "" {
		return 0, "", errors.New(damage)
	}
	seg := filepath.Join(walDirOf(dataDir, walDir), t.Segment)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	if err := f.Truncate(t.Offset); err != nil {
		return 0, "", fmt.Errorf("cut %s at offset %d: %w", seg, t.Offset, err)
	}
	if err := f.Sync(); err != nil {
		return 0, "", err
	}
	back, err := datadir.Inspect(dataDir, opts)
	if err != nil || back.Raft == nil || back.Raft.Tail != nil || back.Raft.LastIndex != t.InvalidFrom-1 {
		return 0, "", fmt.Errorf("the WAL of %s after the cut at entry %d does not read back as a log ending at %d: %v", dataDir, t.InvalidFrom, t.InvalidFrom-1, err)
	}
	return t.InvalidFrom, fmt.Sprintf("%s from offset %d", t.Segment, t.Offset), nil
}
