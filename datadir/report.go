// Package datadir reads one etcd (or PD) member's data dir offline, without writing a byte:
// its identity, raft state, backend, and membership from both of etcd's stores.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic"
)

// Kinds of data dir.
const (
	KindEtcdMember = "etcd-member"
	KindPDMember   = "pd-member"
	KindEmpty      = "empty"
	KindNotEtcd    = "not-etcd"
	// KindDBFile is a bare backend file: an `etcdctl snapshot save` file or a copied db.
	KindDBFile = "db-file"
	// KindDataWithoutWAL is a member's member/snap (its db) with no WAL where etcd would read
	// it: a member run with --wal-dir elsewhere, or one that lost its WAL.
	KindDataWithoutWAL = "data-without-wal"
	// KindWALWithoutData is a WAL dir (--wal-dir) whose data dir holds no member/snap.
	KindWALWithoutData = "wal-without-data"
	// KindBootstrapLeftover is a member/snap/db that holds nothing, with no WAL anywhere: what
	// a first start that failed before creating its WAL leaves (etcd opens the backend before
	// it joins). etcd started here bootstraps again and reuses it.
	KindBootstrapLeftover = "bootstrap-leftover"
)

// Report is everything inspect learned about one data dir. Its JSON form is the contract of
// `etcdmedic inspect -w json` (documented in the README).
type Report struct {
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	KindReason string `json:"kindReason,omitempty"`
	MemberDir  string `json:"memberDir,omitempty"`
	// WALDir is the folder the WAL was read from: <member>/wal, or the --wal-dir given.
	WALDir   string    `json:"walDir,omitempty"`
	Identity *Identity `json:"identity,omitempty"`
	PDJoin   *PDJoin   `json:"pdJoin,omitempty"`
	Raft     *Raft     `json:"raft,omitempty"`
	Backend  *Backend  `json:"backend,omitempty"`
	// BackendError says why the db could not be read (the rest of the report still stands).
	BackendError string      `json:"backendError,omitempty"`
	Membership   *Membership `json:"membership,omitempty"`
	// MembershipError says why a membership view could not be rebuilt.
	MembershipError string `json:"membershipError,omitempty"`
	// LiveCopy is set when a running member was read through a copy: its WAL and .snap files
	// as they were, and a consistent db taken through its snapshot API.
	LiveCopy *LiveCopy `json:"liveCopy,omitempty"`
}

// LiveCopy says how a running member's data was copied for inspection.
type LiveCopy struct {
	Endpoint string `json:"endpoint"`
	// The WAL was copied while etcd appended to it: a cut-short last record is expected.
	Note string `json:"note"`
}

// Identity says which member of which cluster this data dir belongs to.
type Identity struct {
	ClusterID etcdmedic.ID `json:"clusterID"`
	MemberID  etcdmedic.ID `json:"memberID"`
	Name      string       `json:"name"`
	PeerURLs  []string     `json:"peerURLs"`
	// InMembership is false when the member is not in its own membership (removed, or the
	// data dir is from before it was added).
	InMembership bool `json:"inMembership"`
	// RemovedMarked is true when either store marks this member removed.
	RemovedMarked bool `json:"removedMarked"`
}

// Raft is the raft log and snapshot state from member/wal and member/snap.
type Raft struct {
	HardState   HardState    `json:"hardState"`
	FirstIndex  uint64       `json:"firstIndex"`
	LastIndex   uint64       `json:"lastIndex"`
	LastTerm    uint64       `json:"lastTerm"`
	Entries     int          `json:"entries"`
	WALSegments int          `json:"walSegments"`
	WALBytes    int64        `json:"walBytes"`
	Segments    []WALSegment `json:"segments"`
	Snapshot    *Snapshot    `json:"snapshot,omitempty"`
	// SnapshotError says why no usable .snap could be loaded although the WAL records one.
	SnapshotError string `json:"snapshotError,omitempty"`
	// PendingSnapshotDBs are backends received from a leader and not yet applied.
	PendingSnapshotDBs []string     `json:"pendingSnapshotDBs"`
	Tail               *TailProblem `json:"tailProblem,omitempty"`
	// IgnoredWALFiles are .wal files in the WAL dir whose names are not <seq>-<index>.wal:
	// etcd ignores them, and so does inspect.
	IgnoredWALFiles []string `json:"ignoredWALFiles,omitempty"`
}

// Options tune an inspection.
type Options struct {
	// Deep reads the whole db: size in use, key count and a check of every page.
	Deep bool
	// WALDir is the member's --wal-dir when its WAL lives apart from the data dir ("":
	// <data-dir>/member/wal).
	WALDir string
	// Now is the clock for ages (tests pin it).
	Now time.Time
}

var timeNow = time.Now

// ErrNotInspectable wraps every reason a path cannot be inspected at all.
var ErrNotInspectable = errors.New("cannot inspect")

// Inspect reads the data dir at path. It returns an error only when nothing useful can be
// said (missing path, unreadable WAL, files locked by a running etcd); damage it can describe
// (a torn WAL tail, an unreadable db) is reported in the Report.
func Inspect(path string, opts Options) (*Report, error) {
	if opts.Now.IsZero() {
		opts.Now = timeNow()
	}
	r := &Report{Path: path}
	if err := r.classify(path, opts.Now, opts.WALDir); err != nil {
		return nil, err
	}
	if r.Kind == KindDBFile {
		return r, r.inspectDBFile(path, opts)
	}
	if r.Kind != KindEtcdMember && r.Kind != KindPDMember {
		return r, nil
	}
	walDir := r.WALDir
	snapDir := filepath.Join(r.MemberDir, "snap")
	dbPath := filepath.Join(snapDir, "db")

	segs, ignored, err := listWAL(walDir)
	if err != nil {
		return nil, fmt.Errorf("%w: list WAL in %s: %v", ErrNotInspectable, walDir, err)
	}
	if len(segs) > 0 {
		if newest := filepath.Join(walDir, segs[len(segs)-1].Name); walLocked(newest) {
			return nil, fmt.Errorf("%w: the WAL segment %s is %w", ErrNotInspectable, newest, ErrLocked)
		}
	}
	ws, err := readWAL(walDir, snapDir, opts.Deep)
	if err != nil {
		return nil, fmt.Errorf("%w: read WAL in %s: %v", ErrNotInspectable, walDir, err)
	}
	r.Raft = &Raft{
		HardState: ws.HardState, LastIndex: ws.LastIndex, LastTerm: ws.LastTerm, Entries: ws.Entries,
		WALSegments: len(ws.Segments), Segments: ws.Segments, Tail: ws.Tail, PendingSnapshotDBs: []string{},
		IgnoredWALFiles: ignored,
	}
	for _, s := range ws.Segments {
		r.Raft.WALBytes += s.Bytes
	}
	r.Identity = &Identity{ClusterID: ws.ClusterID, MemberID: ws.MemberID}

	snapshot, raftSnap, snapErr := newestUsableSnapshot(snapDir, ws.Snapshots, ws.HardState.Commit)
	if snapErr != nil && !errors.Is(snapErr, fs.ErrNotExist) {
		r.Raft.SnapshotError = snapErr.Error()
	}
	r.Raft.Snapshot = snapshot
	if snapshot != nil {
		r.Raft.FirstIndex = snapshot.Index + 1
	} else {
		r.Raft.FirstIndex = 1
	}
	if _, pending, err := listSnapFiles(snapDir); err == nil && pending != nil {
		r.Raft.PendingSnapshotDBs = pending
	}

	be, err := readBackend(dbPath, opts.Deep)
	switch {
	case errors.Is(err, ErrLocked):
		return nil, fmt.Errorf("%w: %w", ErrNotInspectable, err)
	case err != nil:
		r.BackendError = err.Error()
	default:
		r.Backend = be
	}

	// The v2 store: the snapshot's copy plus the committed changes after it. It can only be
	// rebuilt from a readable snapshot, or from a WAL that still starts at index 0.
	v2 := newV2Membership()
	after := uint64(0)
	v2Complete := true
	switch {
	case raftSnap != nil:
		parsed, err := parseV2Store(raftSnap.GetData())
		if err != nil {
			r.MembershipError = err.Error()
			v2Complete = false
		} else {
			v2 = parsed
		}
		after = snapshot.Index
	case r.Raft.SnapshotError != "" || ws.Segments[ws.FirstSegment].Index > 0:
		r.MembershipError = "the v2 store cannot be rebuilt: no readable snapshot, and the WAL no longer starts at the beginning"
		v2Complete = false
	}
	ci := uint64(0)
	if be != nil {
		ci = be.ConsistentIndex
	}
	replayTo, bound := v2ReplayBound(ws.HardState.Commit, ci, ws.LastIndex)
	v2.replay(ws.Changes, after, replayTo)
	ms := &Membership{V2: v2.sortedMembers(), V2Removed: sortedIDs(v2.Removed), V2CustomKeys: v2.CustomKeys, Changes: ws.Changes,
		V2ReplayedTo: replayTo, V2ReplayBound: bound}
	if !v2Complete {
		ms.V2, ms.V2Removed = nil, nil
	}
	if ms.Changes == nil {
		ms.Changes = []MembershipChange{}
	}
	if be != nil {
		ms.V3 = be.Members
		ms.V3Removed = be.RemovedMembers
		ms.RaftConfState = be.ConfState
		sortMembers(ms.V3)
	}
	r.Membership = ms
	r.fillIdentity()
	return r, nil
}

// v2ReplayBound is the index up to which the v2 store is rebuilt from the WAL, and which
// bound set it: min(last index, max(HardState.Commit, consistent index)). A HardState whose
// only change is the commit index is not fsynced, so after a kill HardState.Commit can lag
// entries the backend has already applied (applied means committed). etcd takes the same max
// when it keeps "committed" entries (v3.6 etcdserver/bootstrap.go bootstrapWALFromSnapshot,
// v3.5.24 etcdserver/raft.go restartAsStandaloneNode: "reset Commit to
// max(HardState.Commit, consistent_index)"), and on a normal restart raft applies the entries
// up to the consistent index to the v2 store again (v3.5 applyConfChange and
// applyEntryNormal with ApplyV2storeOnly for an index at or below the consistent index).
func v2ReplayBound(commit, consistentIndex, lastIndex uint64) (uint64, string) {
	to, bound := commit, "hardState.commit"
	if consistentIndex > to {
		to, bound = consistentIndex, "consistent index"
	}
	if to > lastIndex {
		to, bound = lastIndex, "last index"
	}
	return to, bound
}

// fillIdentity names this member from its own membership: the v3 record first (it survives
// into v3.6+), the v2 one where v3 has no name.
func (r *Report) fillIdentity() {
	id := r.Identity.MemberID
	ms := r.Membership
	v2, v3 := etcdmedic.Find(ms.V2, id), etcdmedic.Find(ms.V3, id)
	for _, m := range []*etcdmedic.Member{v3, v2} {
		if m == nil {
			continue
		}
		if r.Identity.Name == "" {
			r.Identity.Name = m.Name
		}
		if len(r.Identity.PeerURLs) == 0 {
			r.Identity.PeerURLs = m.PeerURLs
		}
	}
	// A removed member's record is gone from both stores; its last name and URLs are still in
	// the committed history.
	for i := len(ms.Changes) - 1; i >= 0 && (r.Identity.Name == "" || len(r.Identity.PeerURLs) == 0); i-- {
		c := ms.Changes[i]
		if c.Member.ID != id {
			continue
		}
		if r.Identity.Name == "" && c.Member.Name != "" {
			r.Identity.Name = c.Member.Name
		}
		if len(r.Identity.PeerURLs) == 0 && len(c.Member.PeerURLs) > 0 {
			r.Identity.PeerURLs = c.Member.PeerURLs
		}
	}
	// Only a store that could be read can say the member is absent.
	r.Identity.InMembership = v2 != nil || v3 != nil || (ms.V2 == nil && ms.V3 == nil)
	for _, list := range [][]etcdmedic.ID{ms.V2Removed, ms.V3Removed} {
		for _, rid := range list {
			if rid == id {
				r.Identity.RemovedMarked = true
			}
		}
	}
}

// classify decides what kind of directory path is, and where its member/ dir is.
func (r *Report) classify(path string, now time.Time, walDir string) error {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s does not exist", ErrNotInspectable, path)
		}
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w: %s: permission denied (run as the user that owns the data dir, or root)", ErrNotInspectable, path)
		}
		return fmt.Errorf("%w: %v", ErrNotInspectable, err)
	}
	if !info.IsDir() {
		if isBboltFile(path) {
			r.Kind, r.KindReason = KindDBFile, "a bare backend (bbolt) file: no WAL, so no raft state and only the v3 membership"
			return nil
		}
		return fmt.Errorf("%w: %s is a file, not a data dir (give the directory passed to etcd as --data-dir, or a db file)", ErrNotInspectable, path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w: %s: permission denied (run as the user that owns the data dir, or root)", ErrNotInspectable, path)
		}
		return fmt.Errorf("%w: read %s: %v", ErrNotInspectable, path, err)
	}
	if len(withoutIgnorable(ents)) == 0 {
		if walDir != "" && isWALDir(walDir) {
			return r.classifyApart(filepath.Join(path, "member"), walDir)
		}
		r.Kind, r.KindReason = KindEmpty, "the directory is empty: a new member may start here"
		return nil
	}
	joinPath := filepath.Join(path, "join")
	if st, err := os.Stat(joinPath); err == nil && st.Mode().IsRegular() {
		j, err := readPDJoin(joinPath, now)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNotInspectable, err)
		}
		r.PDJoin = j
	}
	member := filepath.Join(path, "member")
	if filepath.Base(path) == "member" && !dirExists(member) {
		member = path // the member/ dir itself was given
	}
	if walDir != "" {
		return r.classifyApart(member, walDir)
	}
	if isWALDir(filepath.Join(member, "wal")) {
		r.MemberDir, r.WALDir = member, filepath.Join(member, "wal")
	} else if dbExists(member) {
		r.Kind, r.MemberDir = KindDataWithoutWAL, member
		r.KindReason = "member/snap holds a db, but there is no member/wal with .wal files: etcd runs this member with --wal-dir elsewhere (give it: --wal-dir, or --from-process, --from-config, --from-unit), or its WAL is lost"
		r.checkBootstrapLeftover()
		return nil
	}
	if r.MemberDir == "" {
		r.Kind = KindNotEtcd
		r.KindReason = "no member/wal directory with .wal files"
		if r.PDJoin != nil {
			r.KindReason = "a PD join file but no member/wal: PD will trust the join file and skip joining"
		}
		return nil
	}
	r.Kind = KindEtcdMember
	if r.PDJoin != nil {
		r.Kind = KindPDMember
	}
	return nil
}

// classifyApart classifies a member whose WAL is in its own folder (etcd's --wal-dir): both
// halves must be there, and a WAL left in member/wal meanwhile is not read (etcd would not).
func (r *Report) classifyApart(member, walDir string) error {
	hasWAL, hasDB := isWALDir(walDir), dbExists(member)
	switch {
	case hasWAL && hasDB:
		r.MemberDir, r.WALDir = member, walDir
		if r.Kind == "" {
			r.Kind = KindEtcdMember
			if r.PDJoin != nil {
				r.Kind = KindPDMember
			}
		}
	case hasWAL:
		r.Kind, r.MemberDir, r.WALDir = KindWALWithoutData, member, walDir
		r.KindReason = fmt.Sprintf("the WAL dir %s holds .wal files, but %s has no member/snap/db: etcd would replay a log without the data it was applied to", walDir, member)
	case hasDB && isWALDir(filepath.Join(member, "wal")):
		r.Kind, r.MemberDir, r.WALDir = KindDataWithoutWAL, member, walDir
		r.KindReason = fmt.Sprintf("the WAL is in %s, not in the --wal-dir %s: etcd started with that --wal-dir finds no WAL and starts as a new member, ignoring this data", filepath.Join(member, "wal"), walDir)
	case hasDB:
		r.Kind, r.MemberDir, r.WALDir = KindDataWithoutWAL, member, walDir
		r.KindReason = fmt.Sprintf("member/snap holds a db, but the --wal-dir %s holds no .wal files: the WAL is lost or elsewhere", walDir)
		r.checkBootstrapLeftover()
	default:
		r.Kind, r.KindReason = KindNotEtcd, fmt.Sprintf("no member/snap/db here and no .wal files in the --wal-dir %s", walDir)
	}
	return nil
}

// checkBootstrapLeftover turns a db without a WAL into KindBootstrapLeftover when it holds
// nothing a member ever applied: etcd opens (creates) member/snap/db and its meta bucket
// before it fetches the cluster and creates its WAL (v3.5 etcdserver.NewServer, v3.6
// etcdserver/bootstrap.go bootstrapBackend before bootstrapCluster and bootstrapStorage), and
// never saves a consistent index of 0 (cindex UnsafeUpdateConsistentIndex). A first start that
// failed there (peers unreachable, "cannot fetch cluster info") leaves a db with no consistent
// index, term, revision, member or raft ConfState, and no .snap files. A db that cannot be read
// (locked by a running etcd, damaged) stays data-without-wal.
func (r *Report) checkBootstrapLeftover() {
	snapDir := filepath.Join(r.MemberDir, "snap")
	if snaps, pending, err := listSnapFiles(snapDir); err != nil || len(snaps) > 0 || len(pending) > 0 {
		return
	}
	be, err := readBackend(filepath.Join(snapDir, "db"), false)
	if err != nil || be.ConsistentIndex != 0 || be.Term != 0 || be.Revision != 0 || be.ConfState != nil ||
		len(be.Members) > 0 || len(be.RemovedMembers) > 0 || len(be.Alarms) > 0 {
		return
	}
	r.Kind, r.Backend = KindBootstrapLeftover, be
	r.KindReason = "member/snap/db holds nothing (consistent index 0, no revision, no members) and there is no WAL: the leftover of a first start that failed before etcd created its WAL; etcd started here bootstraps again and reuses it, as on an empty data dir"
}

// isWALDir reports whether dir holds a .wal file etcd would read as a segment (an odd name
// such as backup.wal does not count, as etcd ignores it; a segment etcdmedic then cannot read
// is an error of inspect, not a missing WAL).
func isWALDir(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, _, ok := parseWALName(e.Name()); ok {
			return true
		}
	}
	return false
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

func dbExists(member string) bool {
	st, err := os.Stat(filepath.Join(member, "snap", "db"))
	return err == nil && st.Mode().IsRegular()
}

// inspectDBFile reads a bare db: an `etcdctl snapshot save` file, or a db copied out of a data
// dir. Only the backend and its v3 membership can be read.
func (r *Report) inspectDBFile(path string, opts Options) error {
	be, err := readBackend(path, opts.Deep)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotInspectable, err)
	}
	r.Backend = be
	sortMembers(be.Members)
	r.Membership = &Membership{V3: be.Members, V3Removed: be.RemovedMembers, RaftConfState: be.ConfState, Changes: []MembershipChange{}}
	if r.Membership.V3 == nil {
		r.Membership.V3 = []etcdmedic.Member{}
	}
	if r.Membership.V3Removed == nil {
		r.Membership.V3Removed = []etcdmedic.ID{}
	}
	return nil
}

func isBboltFile(path string) bool {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return false // a FIFO or device would block or lie
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	size, err := statSize(f)
	if err != nil {
		return false
	}
	_, err = readBboltMeta(f, size)
	return err == nil
}

// Ignorable names a data dir may hold and still count as empty: a filesystem's lost+found (a
// fresh volume has one) and etcdmedic's own quarantine folder.
var Ignorable = map[string]bool{"lost+found": true, QuarantineFolder: true}

// QuarantineFolder is where etcdmedic moves stale data when it cannot put it beside the data dir
// on the same filesystem.
const QuarantineFolder = ".etcdmedic-quarantine"

func withoutIgnorable(ents []os.DirEntry) []os.DirEntry {
	var out []os.DirEntry
	for _, e := range ents {
		if !Ignorable[e.Name()] {
			out = append(out, e)
		}
	}
	return out
}
