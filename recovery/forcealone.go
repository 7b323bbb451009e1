package recovery

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/datadir"

	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// forceAlone does offline, on a stopped member whose whole log is committed, what
// `--force-new-cluster` does at start: it appends to the WAL the configuration changes that
// leave the member alone (every other voter and learner removed, itself added first if its
// own log lacks it), built by etcd's own storage.CreateConfigChangeEnts from the same inputs
// etcd uses (the newest snapshot's ConfState and the ConfChange entries after it), and commits
// them. Started after this without --force-new-cluster, etcd applies them as it would a
// forced start's, with no flag that a later restart (a kubelet, a systemd unit) could apply a
// second time.
//
// It returns the IDs it removed; run again, it finds the member alone and changes nothing.
func forceAlone(dataDir, walDir string) (removed []etcdmedic.ID, err error) {
	lg := zap.NewNop()
	opts := datadir.Options{WALDir: walDir}
	walDir = walDirOf(dataDir, walDir)
	r, err := datadir.Inspect(dataDir, opts)
	if err != nil || r.Raft == nil || r.Identity == nil || r.Membership == nil {
		return nil, fmt.Errorf("read the WAL in %s: %v", walDir, orMissing(err))
	}
	st, last := r.Raft.HardState, r.Raft.LastIndex
	if st.Commit != last {
		return nil, fmt.Errorf("the WAL in %s commits up to %d of %d entries: commit the whole log first", walDir, st.Commit, last)
	}
	self := uint64(r.Identity.MemberID)
	ids := raftMembers(r.Raft.Snapshot, r.Membership.Changes)
	ents := storage.CreateConfigChangeEnts(lg, ids, self, st.Term, last)
	if len(ents) == 0 {
		return nil, nil
	}
	for _, id := range ids {
		if id != self {
			removed = append(removed, etcdmedic.ID(id))
		}
	}
	w, err := openAtTail(lg, walDir, r.Raft.Segments, last)
	if err != nil {
		return nil, err
	}
	commit := ents[len(ents)-1].GetIndex()
	term, vote := st.Term, uint64(st.Vote)
	// Entries are synced by Save; the commit index goes with them in the same write.
	if err := w.wal.Save(&raftpb.HardState{Term: &term, Vote: &vote, Commit: &commit}, ents); err != nil {
		w.wal.Close()
		return nil, fmt.Errorf("append the configuration changes to the WAL in %s: %w", walDir, err)
	}
	if err := w.wal.Close(); err != nil {
		return nil, err
	}
	back, err := readBack(dataDir, opts)
	if err != nil || back.Raft == nil || back.Membership == nil {
		return nil, fmt.Errorf("read back the WAL in %s: %v", walDir, orMissing(err))
	}
	if got := raftMembers(back.Raft.Snapshot, back.Membership.Changes); back.Raft.HardState.Commit != commit || !slices.Equal(got, []uint64{self}) {
		return nil, fmt.Errorf("the WAL in %s reads back commit index %d and raft members %v, not %d and only %s", walDir, back.Raft.HardState.Commit, got, commit, r.Identity.MemberID)
	}
	return removed, nil
}

// raftMembers is etcd's GetEffectiveNodeIDsFromWALEntries over what inspect read: the
// snapshot's voters and learners, changed by every ConfChange after it, sorted.
func raftMembers(snap *datadir.Snapshot, changes []datadir.MembershipChange) []uint64 {
	ids := map[uint64]bool{}
	var after uint64
	if snap != nil {
		after = snap.Index
		for _, id := range append(slices.Clone(snap.ConfState.Voters), snap.ConfState.Learners...) {
			ids[uint64(id)] = true
		}
	}
	for _, c := range changes {
		if c.Index <= after {
			continue
		}
		switch c.Kind {
		case datadir.ChangeAdd, datadir.ChangeAddLearner, datadir.ChangePromote:
			ids[uint64(c.Member.ID)] = true
		case datadir.ChangeRemove:
			delete(ids, uint64(c.Member.ID))
		}
	}
	out := make([]uint64, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// walDirOf is where a member's WAL is: its --wal-dir, or member/wal.
func walDirOf(dataDir, walDir string) string {
	if walDir != "" {
		return walDir
	}
	return filepath.Join(dataDir, "member", "wal")
}

func orMissing(err error) any {
	if err != nil {
		return err
	}
	return "no raft state, identity or membership in it"
}
