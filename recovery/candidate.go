package recovery

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// Candidate is one member considered as the survivor.
type Candidate struct {
	Name string `json:"name"`
	// DataDir is the data dir as given (absolute); RealDataDir the folder it resolves to
	// through symlinks, where etcdmedic reads, backs up and quarantines.
	DataDir     string `json:"dataDir"`
	RealDataDir string `json:"realDataDir"`
	// WALDir is the member's --wal-dir when its WAL lives apart ("": member/wal).
	WALDir          string              `json:"walDir,omitempty"`
	MemberID        etcdmedic.ID        `json:"memberID"`
	ClusterID       etcdmedic.ClusterID `json:"clusterID"`
	Commit          uint64              `json:"commit"`          // HardState.commit
	ConsistentIndex uint64              `json:"consistentIndex"` // applied to the backend
	Term            uint64              `json:"term"`
	LastIndex       uint64              `json:"lastIndex"`
	LastTerm        uint64              `json:"lastTerm"` // the term of the last entry: with LastIndex, how up to date the log is
	Revision        int64               `json:"revision"`
	PeerURLs        []string            `json:"peerURLs"`
	ClientURLs      []string            `json:"clientURLs"`
	Source          string              `json:"source"` // "data dir", or how it was read
	// Membership is what this member's data says the members are (to find the URLs of a
	// member whose own data dir was wiped); Removals the members it marks removed.
	Membership []etcdmedic.Member      `json:"-"`
	Removals   map[etcdmedic.ID]string `json:"-"`
	Rejected   string                  `json:"rejected,omitempty"`
	// Unreadable is set when the data dir holds data etcdmedic could not read or trust (as
	// opposed to none at all): it is never moved aside unless the operator accepts the loss.
	Unreadable bool `json:"unreadable,omitempty"`
	// Wiped is set when there is no data at all (a missing or empty data dir).
	Wiped bool `json:"wiped,omitempty"`
	// Standing is the member's place in the survivor's membership: "voter", "learner",
	// "removed at index N", "removed", or "unknown" (not in it).
	Standing string `json:"standing"`
	// Liveness is how the member was found, with the evidence; StoppedByPlan says what plan
	// stopped when the member was running.
	Liveness      MemberState `json:"liveness"`
	StoppedByPlan string      `json:"stoppedByPlan,omitempty"`
	// Loss relative to the chosen survivor: what choosing the survivor costs this member's
	// history (0 for the survivor itself).
	IndexGap    uint64 `json:"indexGapToSurvivor"`
	RevisionGap int64  `json:"revisionGapToSurvivor"`
	// Ahead is how much more this candidate has than the survivor (non-zero only when the
	// operator overrode the choice): the data the override loses.
	AheadIndex    uint64 `json:"aheadOfSurvivorIndex"`
	AheadRevision int64  `json:"aheadOfSurvivorRevision"`
	// TailCut says why the end of its WAL is not history and is cut before its log is
	// committed (an invalid raft log after its commit index, in its newest segment).
	TailCut string `json:"tailCut,omitempty"`
	// Running is set while a process holds the data dir (it is read once stopped).
	Running bool `json:"-"`
}

// Committed is the history a candidate knows to be committed: etcd v3.6 bootstraps from
// max(HardState.commit, consistent index), since HardState is not always synced.
func (c Candidate) Committed() uint64 { return max(c.Commit, c.ConsistentIndex) }

// Kept is the history a recovery from this candidate keeps: its whole log (see
// commitWholeLog), never less than what it knows committed.
func (c Candidate) Kept() uint64 { return max(c.LastIndex, c.Committed()) }

// PastCommit counts the entries of its log beyond what it knows committed: the ones
// --force-new-cluster alone would drop.
func (c Candidate) PastCommit() uint64 { return c.Kept() - c.Committed() }

// Standings a member can have in the survivor's membership (besides "removed at index N").
const (
	StandingVoter   = "voter"
	StandingLearner = "learner"
	StandingRemoved = "removed"
	StandingUnknown = "unknown"
)

// OutOfMembership reports whether the survivor's membership no longer has (or never had)
// this member: it is left out of a recovery unless the operator adds it back on purpose.
func (c Candidate) OutOfMembership() bool {
	return strings.HasPrefix(c.Standing, StandingRemoved) || c.Standing == StandingUnknown
}

// resolvedPath is path made absolute with its symlinks resolved; for a path that does not
// exist (a wiped data dir, a backup dir not made yet) its nearest existing ancestor is
// resolved, so that two spellings of one folder compare equal either way.
func resolvedPath(path string) string {
	if path == "" {
		return ""
	}
	dir, rest := absolute(path), ""
	for {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return absolute(path)
		}
		rest, dir = filepath.Join(filepath.Base(dir), rest), parent
	}
}

// dirs are the folders the member's data lives in, resolved: its data dir, and its WAL dir
// when apart.
func (c Candidate) dirs() []memberDir {
	var out []memberDir
	for _, d := range []memberDir{{c.Name, "data dir", cmp.Or(c.RealDataDir, c.DataDir)}, {c.Name, "WAL dir", c.WALDir}} {
		if d.path != "" {
			d.path = resolvedPath(d.path)
			out = append(out, d)
		}
	}
	return out
}

// memberDir is one of a member's folders, resolved.
type memberDir struct{ member, what, path string }

func (d memberDir) String() string { return d.member + "'s " + d.what + " " + d.path }

// readCandidate reads one member's data dir offline (a running member's is locked: it is read
// once stopped).
func readCandidate(m MemberInput) Candidate {
	// Paths are made absolute here, once: the plan records them, and apply may run from
	// another directory.
	c := Candidate{Name: m.Name, DataDir: absolute(m.DataDir), WALDir: absolute(m.WALDir), Source: "data dir"}
	c.RealDataDir = c.DataDir
	if real, err := filepath.EvalSymlinks(c.DataDir); err == nil {
		c.RealDataDir = real
	}
	if err := dataDirPresent(c.DataDir); errors.Is(err, fs.ErrNotExist) {
		c.Wiped, c.Rejected = true, "its data dir does not exist (wiped)"
		return c
	} else if err != nil {
		c.Unreadable, c.Rejected = true, err.Error()
		return c
	}
	r, err := datadir.Inspect(c.RealDataDir, datadir.Options{WALDir: c.WALDir})
	switch {
	case errors.Is(err, datadir.ErrLocked):
		c.Running, c.Source = true, "running: its data dir is locked"
		c.Rejected = "it runs on its data dir (it is read once stopped)"
		return c
	case err != nil:
		c.Unreadable, c.Rejected = true, err.Error()
		return c
	}
	switch r.Kind {
	case datadir.KindEmpty:
		c.Wiped, c.Rejected = true, "its data dir is empty (wiped)"
		return c
	case datadir.KindEtcdMember, datadir.KindPDMember:
	default:
		c.Unreadable, c.Rejected = true, "not a member data dir: "+r.Kind+" ("+r.KindReason+")"
		return c
	}
	c.MemberID, c.ClusterID = r.Identity.MemberID, r.Identity.ClusterID
	c.Commit, c.Term, c.LastIndex, c.LastTerm = r.Raft.HardState.Commit, r.Raft.HardState.Term, r.Raft.LastIndex, r.Raft.LastTerm
	if r.Backend != nil {
		c.ConsistentIndex, c.Revision = r.Backend.ConsistentIndex, r.Backend.Revision
	} else {
		c.Unreadable, c.Rejected = true, "its db cannot be read: "+r.BackendError
	}
	if damage, cut := walTail(r.Raft.Tail, r.Raft.HardState.Commit); damage != "" {
		c.Unreadable, c.Rejected = true, damage
	} else {
		c.TailCut = cut
	}
	if r.Identity.RemovedMarked || !r.Identity.InMembership {
		c.Rejected = "the member is removed from its own membership (--force-new-cluster would panic: \"removed all voters\")"
	}
	c.PeerURLs = r.Identity.PeerURLs
	c.Membership = withNames(r.Membership.V2, r.Membership.V3)
	c.Removals = removals(r.Membership)
	if me := etcdmedic.Find(r.Membership.V3, r.Identity.MemberID); me != nil && len(me.ClientURLs) > 0 {
		c.ClientURLs = me.ClientURLs
	} else if me := etcdmedic.Find(r.Membership.V2, r.Identity.MemberID); me != nil {
		c.ClientURLs = me.ClientURLs
	}
	return c
}

// withNames is the v2 store's membership (what etcd v3.5 serves) with the names and client
// URLs the v3 store holds for members the v2 store has none for: from v3.6 on a member
// publishes them through the v3 store only. Without a v2 store, the v3 one.
func withNames(v2, v3 []etcdmedic.Member) []etcdmedic.Member {
	if len(v2) == 0 {
		return v3
	}
	out := append([]etcdmedic.Member(nil), v2...)
	for i, m := range out {
		if v := etcdmedic.Find(v3, m.ID); v != nil {
			if m.Name == "" {
				out[i].Name = v.Name
			}
			if len(m.ClientURLs) == 0 {
				out[i].ClientURLs = v.ClientURLs
			}
		}
	}
	return out
}

// removals are the members a data dir marks removed, with the raft index of the removal when
// its WAL still holds it.
func removals(ms *datadir.Membership) map[etcdmedic.ID]string {
	out := map[etcdmedic.ID]string{}
	for _, list := range [][]etcdmedic.ID{ms.V2Removed, ms.V3Removed} {
		for _, id := range list {
			out[id] = StandingRemoved
		}
	}
	for _, ch := range ms.Changes {
		if ch.Kind == datadir.ChangeRemove {
			out[ch.Member.ID] = fmt.Sprintf("%s at index %d", StandingRemoved, ch.Index)
		}
	}
	return out
}

// standing is c's place in ref's membership: by member ID when c's data names one, else by
// name (a wiped member).
func standing(c Candidate, ref Candidate) string {
	id := c.MemberID
	hasID := id != etcdmedic.NoID
	if hasID {
		if at, ok := ref.Removals[id]; ok {
			return at
		}
	}
	for _, m := range ref.Membership {
		if (hasID && m.ID == id) || (!hasID && m.Name == c.Name) {
			if m.IsLearner {
				return StandingLearner
			}
			return StandingVoter
		}
	}
	return StandingUnknown
}

func majorityCluster(cs []Candidate) etcdmedic.ClusterID {
	count := map[etcdmedic.ClusterID]int{}
	best := etcdmedic.NoID
	for _, c := range cs {
		if c.Rejected != "" || c.ClusterID == etcdmedic.NoID {
			continue
		}
		count[c.ClusterID]++
		if best == etcdmedic.NoID || count[c.ClusterID] > count[best] {
			best = c.ClusterID
		}
	}
	return best
}

// rank orders usable candidates by Raft's rule for electing a leader: the most up-to-date
// log first (the term of its last entry, then its last index). Every entry the old cluster
// committed that reached any survivor is in that log (leader completeness), and a recovery
// keeps the whole of it. Ties go to the most known-committed history.
func rank(cs []Candidate) []Candidate {
	var ok []Candidate
	for _, c := range cs {
		if c.Rejected == "" {
			ok = append(ok, c)
		}
	}
	sort.SliceStable(ok, func(i, j int) bool {
		a, b := ok[i], ok[j]
		if a.LastTerm != b.LastTerm {
			return a.LastTerm > b.LastTerm
		}
		if a.Kept() != b.Kept() {
			return a.Kept() > b.Kept()
		}
		return a.Committed() > b.Committed()
	})
	return ok
}
