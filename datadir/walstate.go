package datadir

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// HardState is raft's persisted term, vote and commit index.
type HardState struct {
	Term   uint64 `json:"term"`
	Vote   ID     `json:"vote"`
	Commit uint64 `json:"commit"`
}

// ConfState is raft's view of who votes and who learns.
type ConfState struct {
	Voters   []ID `json:"voters"`
	Learners []ID `json:"learners"`
}

func confStateFrom(cs *raftpb.ConfState) ConfState {
	out := ConfState{Voters: []ID{}, Learners: []ID{}}
	for _, v := range cs.GetVoters() {
		out.Voters = append(out.Voters, ID(v))
	}
	for _, l := range cs.GetLearners() {
		out.Learners = append(out.Learners, ID(l))
	}
	return out
}

// SnapshotMarker is a WAL record saying a snapshot at (index, term) was taken.
type SnapshotMarker struct {
	Index uint64
	Term  uint64
}

// walState is everything read from member/wal.
type walState struct {
	ClusterID, MemberID ID
	HardState           HardState
	Segments            []WALSegment
	LastIndex, LastTerm uint64
	Entries             int
	Snapshots           []SnapshotMarker
	Changes             []MembershipChange
	Tail                *TailProblem
}

// readWAL reads every segment of dir. A problem at the tail is recorded in Tail, not returned:
// the records before it are still the member's history. Errors are for a WAL that cannot be
// read at all.
func readWAL(dir string) (*walState, error) {
	segs, err := listWALSegments(dir)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("no .wal segments in %s", dir)
	}
	st := &walState{Segments: segs}
	haveMeta := false
	err = readWALRecords(dir, segs, func(rec walRecord) error {
		switch rec.Type {
		case recordMetadata:
			var md etcdserverpb.Metadata
			if err := proto.Unmarshal(rec.Data, &md); err != nil {
				return fmt.Errorf("WAL metadata record does not decode: %w", err)
			}
			cid, mid := ID(md.GetClusterID()), ID(md.GetNodeID())
			if haveMeta && (cid != st.ClusterID || mid != st.MemberID) {
				return fmt.Errorf("WAL segments disagree on identity: cluster %s member %s, then cluster %s member %s", st.ClusterID, st.MemberID, cid, mid)
			}
			st.ClusterID, st.MemberID, haveMeta = cid, mid, true
		case recordState:
			var hs raftpb.HardState
			if err := proto.Unmarshal(rec.Data, &hs); err != nil {
				return fmt.Errorf("WAL HardState record does not decode: %w", err)
			}
			if hs.GetTerm() != 0 || hs.GetVote() != 0 || hs.GetCommit() != 0 {
				st.HardState = HardState{Term: hs.GetTerm(), Vote: ID(hs.GetVote()), Commit: hs.GetCommit()}
			}
		case recordSnapshot:
			var s walpb.Snapshot
			if err := proto.Unmarshal(rec.Data, &s); err != nil {
				return fmt.Errorf("WAL snapshot record does not decode: %w", err)
			}
			st.Snapshots = append(st.Snapshots, SnapshotMarker{Index: s.GetIndex(), Term: s.GetTerm()})
		case recordEntry:
			return st.addEntry(rec.Data)
		}
		return nil
	})
	var tail *TailProblem
	if errors.As(err, &tail) {
		st.Tail, err = tail, nil
	}
	if err != nil {
		return nil, err
	}
	if !haveMeta {
		return nil, fmt.Errorf("no metadata record in %s: not a WAL etcd wrote, or its first segment is damaged", dir)
	}
	return st, nil
}

func (st *walState) addEntry(data []byte) error {
	var e raftpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("WAL entry does not decode: %w", err)
	}
	idx := e.GetIndex()
	// A later entry at an index we already have replaces that entry and all after it: the
	// leader overwrote an uncommitted tail.
	if idx <= st.LastIndex {
		keep := st.Changes[:0]
		for _, c := range st.Changes {
			if c.Index < idx {
				keep = append(keep, c)
			}
		}
		st.Changes = keep
	}
	st.LastIndex, st.LastTerm = idx, e.GetTerm()
	st.Entries++
	var ch *MembershipChange
	var err error
	switch e.GetType() {
	case raftpb.EntryConfChange:
		ch, err = decodeConfChange(idx, e.GetTerm(), e.Data)
	case raftpb.EntryNormal:
		if len(e.Data) > 0 {
			ch, err = decodeAttributeChange(idx, e.GetTerm(), e.Data)
		}
	}
	if err != nil {
		return err
	}
	if ch != nil {
		st.Changes = append(st.Changes, *ch)
	}
	return nil
}
