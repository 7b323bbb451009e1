package recovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// Member states, as a destructive step needs them: only "stopped" is proof that a member
// takes no part in any quorum.
const (
	StateServing = "serving" // answered a status request
	StateRunning = "running" // a process of this host holds its data dir, and it does not serve
	StateStopped = "stopped" // nothing listens at its client URLs and nothing holds its data dir
	StateUnknown = "unknown" // no answer that proves anything: a timeout, a TLS or auth error
)

// MemberState is one member's liveness with what proves it.
type MemberState struct {
	Name     string `json:"name"`
	Voter    bool   `json:"voter"`
	State    string `json:"state"`
	Leader   bool   `json:"knowsLeader,omitempty"`
	Evidence string `json:"evidence"`
}

// QuorumCheck is the proof that quorum is lost, or why it cannot be given.
type QuorumCheck struct {
	Voters  int           `json:"voters"`
	Needed  int           `json:"needed"`
	Members []MemberState `json:"members"`
}

// ErrCannotTell means some members could not be shown to be down: a destructive step refuses.
var ErrCannotTell = errors.New("cannot tell whether quorum is lost")

// quorumTarget is one member to check.
type quorumTarget struct {
	Name       string
	ID         etcdmedic.ID // the member ID, when known (NoID otherwise)
	DataDir    string       // on this host; "" when it is elsewhere (a runbook member's node)
	ClientURLs []string
	PeerURLs   []string
	Voter      bool
	// Down: the operator declared it down for good (powered off, fenced): a member that does
	// not answer then counts as stopped, unless it serves or holds its data dir here.
	Down bool
}

// checkQuorumLost proves that fewer voters than a quorum can possibly be up, failing closed: a
// member counts as down only when nothing listens at its client URLs nor its peer URLs
// (connection refused) and no process of this host holds its data dir, or when the operator
// declared it down (--down) and it neither answers nor holds its data dir here. A member that
// serves, runs, or answers with a timeout, a TLS or an authentication error could be part of a
// quorum. It returns ErrNotNeeded
// when a quorum of voters serves with a leader, ErrCannotTell when it cannot rule one out.
func checkQuorumLost(ctx context.Context, conn cluster.Conn, targets []quorumTarget, endpoints []string) (*QuorumCheck, error) {
	eps := append([]string{}, endpoints...)
	for _, t := range targets {
		eps = append(eps, t.ClientURLs...)
	}
	byEndpoint := map[string]*cluster.Probe{}
	var probes []*cluster.Probe
	if len(eps) > 0 {
		probes = cluster.ProbeAll(ctx, conn.To(eps), cluster.ProbeOptions{Discover: true, WithoutQuorum: true})
		for _, p := range probes {
			byEndpoint[etcdmedic.Normalize(p.Endpoint)] = p
		}
	}
	targets = withListedMembers(targets, probes)
	qc := &QuorumCheck{}
	for _, t := range targets {
		qc.Members = append(qc.Members, memberState(t, byEndpoint))
	}
	return qc, qc.verdict()
}

// verdict is nil when fewer voters than a quorum can possibly be up; ErrNotNeeded when a
// quorum serves with a leader; ErrCannotTell when members not proven down could make one.
func (qc *QuorumCheck) verdict() error {
	serving, possible := 0, 0
	qc.Voters = 0
	for _, s := range qc.Members {
		if !s.Voter {
			continue
		}
		qc.Voters++
		if s.State == StateServing && s.Leader {
			serving++
		}
		if s.State != StateStopped {
			possible++
		}
	}
	qc.Needed = qc.Voters/2 + 1
	switch {
	case qc.Voters == 0:
		return fmt.Errorf("%w: no voter is known (no data dir could be read, and no member answered with its member list)", ErrCannotTell)
	case serving >= qc.Needed:
		return fmt.Errorf("%w: %d of %d voters serve with a leader; replace failed members instead (etcdmedic member replace)", ErrNotNeeded, serving, qc.Voters)
	case possible >= qc.Needed:
		return fmt.Errorf("%w: %d of %d voters are not proven down (%s), and %d make a quorum: nothing was changed. Fix the connection settings (--cacert/--cert/--key/--user) if they are wrong, or stop those members, then run again", ErrCannotTell, possible, qc.Voters, qc.notDown(), qc.Needed)
	}
	return nil
}

// withListedMembers completes the targets from the member lists that members answered with: the
// client URLs of a member whose data dir could not be read (it runs), and the voters nobody
// named (a member left off the command line could be up).
func withListedMembers(targets []quorumTarget, probes []*cluster.Probe) []quorumTarget {
	for _, p := range probes {
		if !p.Reached {
			continue
		}
		for _, m := range p.Members {
			i := slices.IndexFunc(targets, func(t quorumTarget) bool {
				return (t.ID != etcdmedic.NoID && t.ID == m.ID) || (m.Name != "" && t.Name == m.Name)
			})
			switch {
			case i >= 0 && len(targets[i].ClientURLs) == 0:
				targets[i].ClientURLs = m.ClientURLs
			case i < 0 && !m.IsLearner && !slices.ContainsFunc(targets, func(t quorumTarget) bool { return m.ClientURLs.Overlap(t.ClientURLs) }):
				targets = append(targets, quorumTarget{Name: m.ShortLabel(), ID: m.ID, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs, Voter: true})
			}
		}
	}
	return targets
}

func (qc *QuorumCheck) notDown() string {
	var parts []string
	for _, s := range qc.Members {
		if s.Voter && s.State != StateStopped {
			parts = append(parts, fmt.Sprintf("%s %s: %s", s.Name, s.State, s.Evidence))
		}
	}
	return strings.Join(parts, "; ")
}

// String says how each member was found.
func (qc *QuorumCheck) String() string {
	var parts []string
	for _, s := range qc.Members {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", s.Name, s.State, s.Evidence))
	}
	return fmt.Sprintf("%d voters, %d needed: %s", qc.Voters, qc.Needed, strings.Join(parts, ", "))
}

func memberState(t quorumTarget, probes map[string]*cluster.Probe) MemberState {
	s := MemberState{Name: t.Name, Voter: t.Voter}
	var errs []string
	refused := len(t.ClientURLs) > 0
	for _, u := range t.ClientURLs {
		p := probes[etcdmedic.Normalize(u)]
		if p == nil {
			refused = false
			continue
		}
		if p.Reached {
			s.State, s.Leader = StateServing, p.Status != nil && p.Status.Leader != etcdmedic.NoID
			s.Evidence = fmt.Sprintf("%s answered (leader %s)", u, p.Status.Leader)
			return s
		}
		errs = append(errs, u+": "+p.Error)
		refused = refused && p.Refused
	}
	if t.DataDir != "" && datadir.RunningOn(t.DataDir) {
		s.State, s.Evidence = StateRunning, "its data dir is locked"
		if pids := local.Holders(t.DataDir); len(pids) > 0 {
			s.Evidence = fmt.Sprintf("its data dir is held by pid %d", pids[0])
		}
		return s
	}
	if t.Down {
		s.State, s.Evidence = StateStopped, "declared down by the operator (--down "+t.Name+")"
		if len(errs) > 0 {
			s.Evidence += "; " + strings.Join(errs, ", ")
		}
		return s
	}
	if refused {
		// Quorum forms over the peer URLs: a member whose client port is closed to us but whose
		// peer port answers may still vote.
		if u, answered := peerAnswers(t.PeerURLs); answered {
			s.State, s.Evidence = StateUnknown, strings.Join(errs, ", ")+"; but its peer URL "+u+" accepts connections"
			return s
		}
		s.State, s.Evidence = StateStopped, strings.Join(errs, ", ")
		if len(t.PeerURLs) > 0 {
			s.Evidence += "; its peer URLs refuse too"
		}
		if t.DataDir != "" {
			s.Evidence += "; its data dir is not locked"
		}
		return s
	}
	if len(t.ClientURLs) == 0 && t.DataDir != "" {
		if _, err := os.Stat(t.DataDir); err == nil || errors.Is(err, os.ErrNotExist) {
			// No URL on record (a wiped member nobody names): its data dir is all there is.
			s.State, s.Evidence = StateStopped, "no client URL on record; its data dir is not locked"
			return s
		}
	}
	s.State, s.Evidence = StateUnknown, strings.Join(errs, ", ")
	if s.Evidence == "" {
		s.Evidence = "no client URL to ask"
	}
	s.Evidence += " (a member that does not answer may be powered off: once you are sure it is, and will stay, down, say so with --down " + t.Name + ")"
	return s
}

// peerAnswers reports whether any of the peer URLs accepts a TCP connection (or does not
// refuse one within a second): only a refusal proves nothing listens.
func peerAnswers(urls []string) (string, bool) {
	for _, u := range urls {
		host := etcdmedic.Normalize(u)
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			c.Close()
			return u, true
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return u, true
		}
	}
	return "", false
}
