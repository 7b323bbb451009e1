package recovery

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

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
func commitWholeLog(dataDir string) (before, after uint64, err error) {
	lg := zap.NewNop()
	walDir := filepath.Join(dataDir, "member", "wal")
	walsnap, err := newestSnapshot(lg, walDir, filepath.Join(dataDir, "member", "snap"))
	if err != nil {
		return 0, 0, err
	}
	w, last, err := openForAppend(lg, walDir, walsnap)
	if err != nil {
		return 0, 0, err
	}
	st := w.state
	before = st.GetCommit()
	if before >= last {
		return before, before, w.wal.Close()
	}
	st.Commit = &last
	if err := w.wal.Save(st, nil); err != nil {
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
	r, err := wal.OpenForRead(lg, walDir, walsnap)
	if err != nil {
		return before, 0, fmt.Errorf("read back the WAL in %s: %w", walDir, err)
	}
	defer r.Close()
	_, back, _, err := r.ReadAll()
	if err != nil {
		return before, 0, fmt.Errorf("read back the WAL in %s: %w", walDir, err)
	}
	if back.GetCommit() != last {
		return before, 0, fmt.Errorf("the WAL in %s reads back commit index %d, not the %d written", walDir, back.GetCommit(), last)
	}
	return before, last, nil
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
