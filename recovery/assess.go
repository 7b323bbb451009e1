// Package recovery rebuilds a cluster that lost quorum from its best surviving member, losing
// nothing that member had committed: plan (assess, choose the survivor, show what each choice
// loses), then apply (back up, force a one-member cluster, restart it clean, re-add the others
// one at a time as learners, verify), journaled so that an interrupted recovery resumes.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// MemberInput is one member's data dir, as the operator names it (--data-dir NAME=PATH).
type MemberInput struct {
	Name    string
	DataDir string
}

// Candidate is one member considered as the survivor.
type Candidate struct {
	Name            string   `json:"name"`
	DataDir         string   `json:"dataDir"`
	MemberID        string   `json:"memberID"`
	ClusterID       string   `json:"clusterID"`
	Commit          uint64   `json:"commit"`          // HardState.commit
	ConsistentIndex uint64   `json:"consistentIndex"` // applied to the backend
	Term            uint64   `json:"term"`
	LastIndex       uint64   `json:"lastIndex"`
	Revision        int64    `json:"revision"`
	PeerURLs        []string `json:"peerURLs"`
	ClientURLs      []string `json:"clientURLs"`
	Source          string   `json:"source"` // "data dir" or "live status" (the member was running)
	// Membership is what this member's data says the members are (to find the URLs of a
	// member whose own data dir was wiped).
	Membership []datadir.Member `json:"-"`
	Rejected   string           `json:"rejected,omitempty"`
	// Loss relative to the chosen survivor: what choosing the survivor costs this member's
	// history (0 for the survivor itself).
	IndexGap    uint64 `json:"indexGapToSurvivor"`
	RevisionGap int64  `json:"revisionGapToSurvivor"`
	// Ahead is how much more this candidate has than the survivor (non-zero only when the
	// operator overrode the choice): the data the override loses.
	AheadIndex    uint64 `json:"aheadOfSurvivorIndex"`
	AheadRevision int64  `json:"aheadOfSurvivorRevision"`
}

// Committed is the history a candidate holds for sure: etcd v3.6 bootstraps from
// max(HardState.commit, consistent index), since HardState is not always synced.
func (c Candidate) Committed() uint64 { return max(c.Commit, c.ConsistentIndex) }

// Assessment is what plan found.
type Assessment struct {
	ClusterID  string      `json:"clusterID"`
	Candidates []Candidate `json:"candidates"`
	Survivor   string      `json:"survivor"`
	Override   bool        `json:"override"`
	Warnings   []string    `json:"warnings"`
	Quorum     string      `json:"quorum"`
}

// ErrNotNeeded means the cluster has quorum: recovery would only do harm.
var ErrNotNeeded = errors.New("quorum is not lost")

// Assess reads every member's data dir (or, for a member still running without quorum, its
// live status), confirms quorum is lost, ranks the candidates and chooses the survivor.
func Assess(ctx context.Context, conn *cluster.Conn, members []MemberInput, survivor string) (*Assessment, error) {
	if len(members) == 0 {
		return nil, errors.New("give every member's data dir: --data-dir NAME=PATH (one per member)")
	}
	var view *cluster.View
	if conn != nil && len(conn.Endpoints) > 0 {
		view = cluster.Diagnose(ctx, *conn, cluster.ProbeOptions{Discover: true, WithoutQuorum: true}, false, time.Now)
		if len(view.Members) > 0 && !view.Quorum.Lost() && len(view.Leaders) > 0 {
			return nil, fmt.Errorf("%w: %d of %d voters are up and there is a leader; replace failed members instead (etcdmedic member replace)", ErrNotNeeded, view.Quorum.VotersUp, view.Quorum.Voters)
		}
	}
	a := &Assessment{Warnings: []string{}, Quorum: "lost (confirmed by doctor)"}
	if view == nil || len(view.Members) == 0 {
		a.Quorum = "no member answered (no endpoints given, or all down)"
	}
	for _, m := range members {
		a.Candidates = append(a.Candidates, candidate(m, view))
	}
	a.ClusterID = majorityCluster(a.Candidates)
	for i := range a.Candidates {
		c := &a.Candidates[i]
		switch {
		case c.Rejected != "":
		case c.ClusterID != a.ClusterID:
			c.Rejected = fmt.Sprintf("its data belongs to cluster %s, not %s", c.ClusterID, a.ClusterID)
		}
	}
	ranked := rank(a.Candidates)
	if len(ranked) == 0 {
		return nil, errors.New("no usable data dir: every candidate was rejected (see each one's reason)")
	}
	a.Survivor = ranked[0].Name
	if survivor != "" {
		c := a.find(survivor)
		if c == nil {
			return nil, fmt.Errorf("--survivor %s: no such member among the data dirs given", survivor)
		}
		if c.Rejected != "" {
			return nil, fmt.Errorf("--survivor %s cannot be used: %s", survivor, c.Rejected)
		}
		a.Survivor, a.Override = survivor, survivor != ranked[0].Name
	}
	s := a.find(a.Survivor)
	for i := range a.Candidates {
		c := &a.Candidates[i]
		if c.Rejected != "" || c.Name == s.Name {
			continue
		}
		if c.Committed() < s.Committed() {
			c.IndexGap = s.Committed() - c.Committed()
		} else {
			c.AheadIndex = c.Committed() - s.Committed()
		}
		if c.Revision < s.Revision {
			c.RevisionGap = s.Revision - c.Revision
		} else {
			c.AheadRevision = c.Revision - s.Revision
		}
		if a.Override && (c.AheadIndex > 0 || c.AheadRevision > 0) {
			a.Warnings = append(a.Warnings, fmt.Sprintf("--survivor %s loses what %s has beyond it: %d raft entries, %d revisions", s.Name, c.Name, c.AheadIndex, c.AheadRevision))
		}
	}
	return a, nil
}

func (a *Assessment) find(name string) *Candidate {
	for i := range a.Candidates {
		if a.Candidates[i].Name == name {
			return &a.Candidates[i]
		}
	}
	return nil
}

// Survivor returns the chosen candidate.
func (a *Assessment) SurvivorCandidate() Candidate { return *a.find(a.Survivor) }

// candidate reads one member: its data dir offline, or, when a running member holds it, the
// member's live status (served even without quorum).
func candidate(m MemberInput, view *cluster.View) Candidate {
	c := Candidate{Name: m.Name, DataDir: m.DataDir, Source: "data dir"}
	r, err := datadir.Inspect(m.DataDir, datadir.Options{})
	if errors.Is(err, datadir.ErrLocked) && view != nil {
		if live := liveByName(view, m.Name); live != nil && live.Up() {
			st := live.Probe.Status
			c.Source, c.MemberID, c.ClusterID = "live status (the member is running)", st.MemberID, st.ClusterID
			c.Commit, c.ConsistentIndex, c.Term, c.Revision = st.RaftIndex, st.AppliedIndex, st.RaftTerm, st.Revision
			c.PeerURLs, c.ClientURLs = live.PeerURLs, live.ClientURLs
			for _, lm := range view.Members {
				id, _ := datadir.ParseID(lm.ID)
				c.Membership = append(c.Membership, datadir.Member{ID: id, Name: lm.Name, PeerURLs: lm.PeerURLs, ClientURLs: lm.ClientURLs, IsLearner: lm.IsLearner})
			}
			return c
		}
	}
	if err != nil {
		c.Rejected = err.Error()
		return c
	}
	if r.Kind != datadir.KindEtcdMember && r.Kind != datadir.KindPDMember {
		c.Rejected = "not a member data dir: " + r.Kind
		return c
	}
	c.MemberID, c.ClusterID = r.Identity.MemberID.String(), r.Identity.ClusterID.String()
	c.Commit, c.Term, c.LastIndex = r.Raft.HardState.Commit, r.Raft.HardState.Term, r.Raft.LastIndex
	if r.Backend != nil {
		c.ConsistentIndex, c.Revision = r.Backend.ConsistentIndex, r.Backend.Revision
	} else {
		c.Rejected = "its db cannot be read: " + r.BackendError
	}
	if r.Raft.Tail != nil && r.Raft.Tail.Kind != "torn-write" && r.Raft.Tail.Kind != "truncated" {
		c.Rejected = "its WAL is damaged: " + r.Raft.Tail.Detail
	}
	if r.Identity.RemovedMarked || !r.Identity.InMembership {
		c.Rejected = "the member is removed from its own membership (--force-new-cluster would panic: \"removed all voters\")"
	}
	c.PeerURLs = r.Identity.PeerURLs
	c.Membership = r.Membership.V2
	if len(c.Membership) == 0 {
		c.Membership = r.Membership.V3
	}
	if me := datadir.Find(r.Membership.V3, r.Identity.MemberID); me != nil && len(me.ClientURLs) > 0 {
		c.ClientURLs = me.ClientURLs
	} else if me := datadir.Find(r.Membership.V2, r.Identity.MemberID); me != nil {
		c.ClientURLs = me.ClientURLs
	}
	return c
}

func liveByName(v *cluster.View, name string) *cluster.MemberView {
	for i, m := range v.Members {
		if m.Name == name {
			return &v.Members[i]
		}
	}
	return nil
}

func majorityCluster(cs []Candidate) string {
	count := map[string]int{}
	best := ""
	for _, c := range cs {
		if c.Rejected != "" || c.ClusterID == "" {
			continue
		}
		count[c.ClusterID]++
		if best == "" || count[c.ClusterID] > count[best] {
			best = c.ClusterID
		}
	}
	return best
}

// rank orders usable candidates: most committed history, then term, then last index.
func rank(cs []Candidate) []Candidate {
	var ok []Candidate
	for _, c := range cs {
		if c.Rejected == "" {
			ok = append(ok, c)
		}
	}
	sort.SliceStable(ok, func(i, j int) bool {
		a, b := ok[i], ok[j]
		if a.Committed() != b.Committed() {
			return a.Committed() > b.Committed()
		}
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		return a.LastIndex > b.LastIndex
	})
	return ok
}
