package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdmedic/etcdmedic"
)

// othersUnchangedSincePlan reads every member but the survivor offline again, once all are
// stopped and before the survivor's data changes, and refuses when any log differs from what
// the plan read (staleHistory). The survivor is not read: an interrupted run of the rebuild may
// have changed it already (its whole log committed, the removals appended), and the plan's
// record of it is what the others are compared with.
func (a *Applier) othersUnchangedSincePlan() error {
	p := a.Plan
	if p.Assessment == nil {
		return nil
	}
	now := map[string]Candidate{}
	for _, m := range p.Members {
		if m.Name == p.Survivor {
			continue
		}
		now[m.Name] = readCandidate(MemberInput{Name: m.Name, DataDir: m.DataDir, WALDir: m.WALDir})
	}
	return staleHistory(p.Assessment, now)
}

// staleHistory refuses a plan when a member other than the survivor holds another log than the
// plan read from it: any other last term, last index or commit index, data where there was none
// or none where there was some, another member's data, or a member running again.
//
// Any difference refuses, not only one that would rank above the survivor: every write the
// cluster committed after the plan went through a majority of voters, and so changed the log
// of at least one member besides the survivor (the survivor alone is no majority). Whether
// the survivor got those writes too cannot be read now (a rerun may have changed it already),
// and a log rewritten by a new leader can rank below the plan's survivor yet hold what a
// later quorum acknowledged. A stopped member's log does not change by itself (a restart
// without a leader moves neither its last entry nor its commit index), so a difference means
// the cluster ran after the plan. A new plan is cheap; a lost write is not.
func staleHistory(a *Assessment, now map[string]Candidate) error {
	s := a.SurvivorCandidate()
	var names []string
	for name := range now {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		was := a.find(name)
		if was == nil {
			continue
		}
		c := now[name]
		why := historyMoved(*was, c)
		if why == "" {
			continue
		}
		if newerThan(c, s) {
			return fmt.Errorf("%w: %s now holds a newer or longer log than the plan's survivor %s (last term %d, last index %d, commit %d; %s had term %d, index %d): the cluster ran after the plan was made (%s). No data was changed: make a new plan (etcdmedic recover plan) with the members as they are now",
				ErrStale, name, s.Name, c.LastTerm, c.LastIndex, c.Commit, s.Name, s.LastTerm, s.LastIndex, why)
		}
		return fmt.Errorf("%w: %s's log is not the one the plan read (%s): the cluster ran after the plan was made. No data was changed: make a new plan (etcdmedic recover plan) with the members as they are now",
			ErrStale, name, why)
	}
	return nil
}

// historyMoved says how a member's log now differs from what the plan read ("" when it does
// not).
func historyMoved(was, now Candidate) string {
	switch {
	case now.Running:
		return "it runs on its data dir again"
	case was.Wiped && now.Wiped:
		return ""
	case was.Wiped:
		return fmt.Sprintf("it had no data, now it holds a log to index %d (term %d)", now.LastIndex, now.LastTerm)
	case now.Wiped:
		return "its data dir was emptied or removed"
	case was.MemberID != now.MemberID || was.ClusterID != now.ClusterID:
		return fmt.Sprintf("it held member %s of cluster %s, now member %s of cluster %s", was.MemberID, was.ClusterID, now.MemberID, now.ClusterID)
	case was.LastTerm != now.LastTerm || was.LastIndex != now.LastIndex || was.Commit != now.Commit:
		return fmt.Sprintf("last term %d, last index %d, commit %d when planned; now %d, %d, %d", was.LastTerm, was.LastIndex, was.Commit, now.LastTerm, now.LastIndex, now.Commit)
	}
	// Whether it reads whole is not compared: plan read the best candidates page by page (a
	// damaged db page makes one unreadable), this read does not, and a damaged page is no sign
	// of the cluster running. Its log positions are.
	return ""
}

// newerThan reports whether c would now be chosen over the plan's survivor s by rank (Raft's
// election rule), whatever made either unusable as a survivor.
func newerThan(c, s Candidate) bool {
	c.Rejected, s.Rejected = "", ""
	if c.Wiped || c.Running {
		return false
	}
	return rank([]Candidate{s, c})[0].Name == c.Name
}

// requireAlone refuses a survivor found serving at the force step unless it is the one-member
// cluster the step makes: every other member its member list holds is one the plan knows (the
// leftovers of the forced start, etcd #20055 and #20896, that remove-leftovers removes), and no
// other member of the plan runs or serves. The old cluster back with quorum fails one or both.
func (a *Applier) requireAlone(ctx context.Context, survivor PlanMember) error {
	cli, err := a.client(survivor.ClientURLs)
	if err != nil {
		return err
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s serves writes, but its member list cannot be read (%v): it is not proven alone; nothing was changed", ErrStale, survivor.Name, err)
	}
	var listed []etcdmedic.Member
	for _, m := range list.Members {
		listed = append(listed, etcdmedic.Member{ID: etcdmedic.ID(m.ID), Name: m.Name, IsLearner: m.IsLearner})
	}
	var targets []quorumTarget
	for _, m := range a.Plan.Members {
		if m.Name == survivor.Name {
			continue
		}
		dir := m.DataDir
		if m.Runbook != "" {
			dir = ""
		}
		targets = append(targets, quorumTarget{Name: m.Name, ID: m.MemberID, DataDir: dir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
			Voter: true, Down: slices.Contains(a.Plan.DeclaredDown, m.Name)})
	}
	var others []MemberState
	if len(targets) > 0 {
		qc, _ := checkQuorumLost(ctx, a.conn(), targets, nil)
		others = qc.Members
	}
	why := notAlone(etcdmedic.ID(list.Header.MemberId), listed, a.knownIDs(), others)
	if why == "" {
		return nil
	}
	if err := a.requireQuorumLost(ctx); err != nil && !errors.Is(err, ErrCannotTell) {
		return fmt.Errorf("%w (%s runs and serves writes, but %s); nothing was changed: check the cluster, and if it lost quorum again, run recover plan again", err, survivor.Name, why)
	}
	return fmt.Errorf("%w: %s runs and serves writes, but not as the one-member cluster this step makes: %s. Quorum may be back (the members started by a supervisor etcdmedic does not know?); nothing was changed: check the cluster, and run recover plan again if it still has lost quorum", ErrStale, survivor.Name, why)
}

// knownIDs are the member IDs the plan knows: its members and the survivor's membership as
// the plan read it (a forced start's leftovers are among them).
func (a *Applier) knownIDs() map[etcdmedic.ID]bool {
	known := map[etcdmedic.ID]bool{}
	for _, m := range a.Plan.Members {
		if m.MemberID != etcdmedic.NoID {
			known[m.MemberID] = true
		}
	}
	if a.Plan.Assessment != nil {
		if s := a.Plan.Assessment.find(a.Plan.Survivor); s != nil {
			for _, m := range s.Membership {
				known[m.ID] = true
			}
		}
	}
	return known
}

// notAlone says why a serving survivor (self) is not the one-member cluster a forced start
// makes ("" when it is): its member list holds a member the plan does not know (added since),
// or another member of the plan is not proven stopped (a quorum of the old cluster could be
// up). Members the plan knows that are listed but stopped are a forced start's leftovers.
func notAlone(self etcdmedic.ID, listed []etcdmedic.Member, known map[etcdmedic.ID]bool, others []MemberState) string {
	var why []string
	for _, m := range listed {
		if m.ID != self && !known[m.ID] {
			why = append(why, fmt.Sprintf("its member list holds %s (%s), a member the plan does not know", m.ShortLabel(), m.ID))
		}
	}
	for _, o := range others {
		if o.State != StateStopped {
			why = append(why, fmt.Sprintf("%s is %s (%s)", o.Name, o.State, o.Evidence))
		}
	}
	return strings.Join(why, "; ")
}
