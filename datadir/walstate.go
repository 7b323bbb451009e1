package datadir

import (
	"errors"
	"fmt"

	"github.com/etcdmedic/etcdmedic"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// HardState is raft's persisted term, vote and commit index.
type HardState struct {
	Term   uint64       `json:"term"`
	Vote   etcdmedic.ID `json:"vote"`
	Commit uint64       `json:"commit"`
}

// ConfState is raft's view of who votes and who learns.
type ConfState struct {
	Voters   []etcdmedic.ID `json:"voters"`
	Learners []etcdmedic.ID `json:"learners"`
}

func confStateFrom(cs *raftpb.ConfState) ConfState {
	out := ConfState{Voters: []etcdmedic.ID{}, Learners: []etcdmedic.ID{}}
	for _, v := range cs.GetVoters() {
		out.Voters = append(out.Voters, etcdmedic.ID(v))
	}
	for _, l := range cs.GetLearners() {
		out.Learners = append(out.Learners, etcdmedic.ID(l))
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
	ClusterID, MemberID etcdmedic.ID
	HardState           HardState
	Segments            []WALSegment
	FirstSegment        int // the segment reading started at (the newest snapshot's)
	LastIndex, LastTerm uint64
	Entries             int
	Snapshots           []SnapshotMarker
	Changes             []MembershipChange
	Tail                *TailProblem
	// terms holds where each term's run of entries starts, to check that the log stays a
	// raft log (terms never go down from one entry to the next).
	terms []termRun
}

type termRun struct{ start, term uint64 }

// readWAL reads the WAL the way etcd does at start: from the segment that holds the newest
// usable snapshot on (or from the first segment when there is none). full also reads and
// checks the payload of every entry. A problem at the tail is recorded in Tail, not returned:
// the records before it are still the member's history. Errors are for a WAL that cannot be
// read at all.
func readWAL(dir, snapDir string, full bool) (*walState, error) {
	segs, err := listWALSegments(dir)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("no .wal segments in %s", dir)
	}
	// Past a gap in the sequence nothing is history etcd would read: read up to it.
	n, gap := walGap(segs)
	if gap != nil {
		st, err := readWALBefore(dir, snapDir, segs[:n], full)
		if err != nil {
			return nil, err
		}
		st.Tail = gap
		return st, nil
	}
	return readWALBefore(dir, snapDir, segs, full)
}

// readWALBefore reads the contiguous segments segs.
func readWALBefore(dir, snapDir string, segs []WALSegment, full bool) (*walState, error) {
	snaps, _, _ := listSnapFiles(snapDir)
	for i, sf := range snaps {
		if i == 3 {
			break // beyond a few snapshots back, reading everything costs no more
		}
		from := segmentFor(segs, sf.Index)
		if from == 0 {
			break
		}
		st, err := readWALFrom(dir, segs, from, full)
		if err != nil {
			return nil, err
		}
		if st.hasSnapshot(sf) {
			return st, nil
		}
	}
	return readWALFrom(dir, segs, 0, full)
}

// segmentFor is the index of the segment that holds raft index idx: the last one starting at
// or before it.
func segmentFor(segs []WALSegment, idx uint64) int {
	at := 0
	for i, s := range segs {
		if s.Index <= idx {
			at = i
		}
	}
	return at
}

func (st *walState) hasSnapshot(sf snapFile) bool {
	for _, m := range st.Snapshots {
		if m.Index == sf.Index && m.Term == sf.Term {
			return sf.Index <= st.HardState.Commit
		}
	}
	return false
}

func readWALFrom(dir string, segs []WALSegment, from int, full bool) (*walState, error) {
	st := &walState{Segments: segs, FirstSegment: from}
	haveMeta := false
	err := readWALRecords(dir, segs[from:], full, func(rec walRecord) error {
		switch rec.Type {
		case recordMetadata:
			var md etcdserverpb.Metadata
			if err := proto.Unmarshal(rec.Data, &md); err != nil {
				return fmt.Errorf("WAL metadata record does not decode: %w", err)
			}
			cid, mid := etcdmedic.ID(md.GetClusterID()), etcdmedic.ID(md.GetNodeID())
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
				st.HardState = HardState{Term: hs.GetTerm(), Vote: etcdmedic.ID(hs.GetVote()), Commit: hs.GetCommit()}
			}
		case recordSnapshot:
			var s walpb.Snapshot
			if err := proto.Unmarshal(rec.Data, &s); err != nil {
				return fmt.Errorf("WAL snapshot record does not decode: %w", err)
			}
			st.Snapshots = append(st.Snapshots, SnapshotMarker{Index: s.GetIndex(), Term: s.GetTerm()})
		case recordEntry:
			return st.addEntry(rec)
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

func (st *walState) addEntry(rec walRecord) error {
	etype, term, idx, payload, ok := parseEntry(rec.Data)
	if !ok && !rec.Skipped {
		return fmt.Errorf("WAL entry does not decode (no term or index)")
	}
	if bad := st.breaksLog(idx, term); bad != "" {
		return &TailProblem{Segment: rec.Segment, Offset: rec.Offset, Kind: "invalid-log", InvalidFrom: idx, Newest: rec.Newest,
			Detail: bad + ": not a raft log from here on"}
	}
	st.noteTerm(idx, term)
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
	st.LastIndex, st.LastTerm = idx, term
	st.Entries++
	if rec.Skipped {
		return nil // a large normal entry: user data, never a membership change
	}
	var ch *MembershipChange
	var err error
	switch etype {
	case entryConfChange:
		ch, err = decodeConfChange(idx, term, payload)
	case entryNormal:
		if len(payload) > 0 {
			ch, err = decodeAttributeChange(idx, term, payload)
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

// breaksLog says why an entry at idx with term cannot follow the log read so far: an index
// past the next one (a gap), or a term below the entry before it. Raft's log matching needs
// both; a WAL that breaks them was not written by raft (a power cut that kept a later write and
// dropped an earlier one, or a bug), and the entries from there on are not history.
func (st *walState) breaksLog(idx, term uint64) string {
	if st.Entries == 0 {
		return ""
	}
	if idx > st.LastIndex+1 {
		return fmt.Sprintf("entry %d follows entry %d (a gap)", idx, st.LastIndex)
	}
	if before, ok := st.termAt(idx - 1); ok && term < before {
		return fmt.Sprintf("entry %d has term %d, below the term %d of entry %d", idx, term, before, idx-1)
	}
	return ""
}

// termAt is the term of the entry at idx, when it was read.
func (st *walState) termAt(idx uint64) (uint64, bool) {
	for i := len(st.terms) - 1; i >= 0; i-- {
		if st.terms[i].start <= idx {
			return st.terms[i].term, idx <= st.LastIndex
		}
	}
	return 0, false
}

// noteTerm records that the log holds term from idx on (an entry at idx replaces any after it).
func (st *walState) noteTerm(idx, term uint64) {
	for len(st.terms) > 0 && st.terms[len(st.terms)-1].start >= idx {
		st.terms = st.terms[:len(st.terms)-1]
	}
	if n := len(st.terms); n == 0 || st.terms[n-1].term != term {
		st.terms = append(st.terms, termRun{idx, term})
	}
}
