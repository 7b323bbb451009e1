package member

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// The decisions every membership change goes through before anything changes; each refusal is
// ErrRefused, and says why.

// ErrRefused marks a change that the guards refuse: nothing was changed.
var ErrRefused = errors.New("refused")

// ErrLearnerPending marks a change refused because another learner waits to be promoted
// (etcd allows one learner at a time); such an error is also ErrRefused.
var ErrLearnerPending = errors.New("a learner is pending")

// learnerPending is a refusal that errors.Is also matches to ErrLearnerPending.
type learnerPending struct{ error }

func (e learnerPending) Is(target error) bool { return target == ErrLearnerPending }
func (e learnerPending) Unwrap() error        { return e.error }

// CheckChange refuses a membership change without quorum or with another learner pending.
func CheckChange(v *cluster.View, joining []string) error { return checkChange(v, joining, nil) }

func checkChange(v *cluster.View, joining []string, replacing []etcdmedic.ID) error {
	switch {
	case len(v.Members) == 0:
		return fmt.Errorf("%w: no member of the cluster answered", ErrRefused)
	case v.Quorum.Lost():
		q := v.Quorum
		why := ""
		if q.CutOff > 0 {
			why = fmt.Sprintf(" %d of them answer but are cut off from the quorum;", q.CutOff)
		}
		return fmt.Errorf("%w: the cluster has no quorum (%d of %d voters up):%s a membership change cannot commit; recover quorum first (etcdmedic recover)", ErrRefused, q.VotersUp, q.Voters, why)
	}
	if p := pendingLearners(v, joining, replacing); len(p) > 0 {
		return learnerPending{fmt.Errorf("%w: learner %s is still pending: promote or remove it first (etcd allows one learner at a time)", ErrRefused, strings.Join(p, ", "))}
	}
	return nil
}

// CheckRemove finds the member and refuses a removal that would lose quorum.
func CheckRemove(v *cluster.View, nameOrID string) (*cluster.MemberView, error) {
	m := v.Find(nameOrID)
	var replacing []etcdmedic.ID
	if m != nil {
		replacing = []etcdmedic.ID{m.ID}
	}
	if err := checkChange(v, nil, replacing); err != nil && !errors.Is(err, ErrLearnerPending) {
		return nil, err
	}
	if m == nil {
		return nil, noSuchMember{fmt.Errorf("%w: no member %q (members: %s)", ErrRefused, nameOrID, memberNames(v))}
	}
	return m, quorumAfterRemoval(v, *m)
}

// pendingLearners are learners other than the member being joined (a rerun finds its own)
// and the ones being replaced.
func pendingLearners(v *cluster.View, joiningURLs []string, replacing []etcdmedic.ID) []string {
	var out []string
	self := v.ByPeerURLs(joiningURLs)
	for _, m := range v.Members {
		if m.IsLearner && (self == nil || self.ID != m.ID) && !slices.Contains(replacing, m.ID) {
			out = append(out, m.Label())
		}
	}
	return out
}

// quorumAfterRemoval refuses a removal that would leave fewer voters up than a quorum.
func quorumAfterRemoval(v *cluster.View, m cluster.MemberView) error {
	if m.IsLearner {
		return nil
	}
	// Only voters in the quorum count: one that answers but is cut off from its peers would
	// not help the others commit.
	voters, up := v.Quorum.Voters-1, v.Quorum.InQuorum
	if m.InQuorum() {
		up--
	}
	if needed := voters/2 + 1; up < needed {
		return fmt.Errorf("%w: removing %s (%s) would leave %d of %d voters up, %d are needed: bring a down or cut-off member back first", ErrRefused, m.Label(), m.State, up, voters, needed)
	}
	return nil
}

// checkPromote finds the learner to promote: refused when the cluster has no learner by that
// name or ID (a voter already, or no such member).
func checkPromote(v *cluster.View, nameOrID string) (*cluster.MemberView, error) {
	m := v.Find(nameOrID)
	switch {
	case len(v.Members) == 0:
		return nil, fmt.Errorf("%w: no member of the cluster answered", ErrRefused)
	case m == nil:
		return nil, fmt.Errorf("%w: %s is not a learner of this cluster (members: %s)", ErrRefused, nameOrID, memberNames(v))
	case !m.IsLearner:
		return nil, fmt.Errorf("%w: %s is not a learner of this cluster: it is a voter already", ErrRefused, m.Label())
	}
	return m, nil
}

// ErrNoSuchMember marks a refusal naming a member the cluster does not have (a mistyped name
// or ID); such an error is also ErrRefused.
var ErrNoSuchMember = errors.New("no such member")

// noSuchMember is a refusal that errors.Is also matches to ErrNoSuchMember.
type noSuchMember struct{ error }

func (e noSuchMember) Is(target error) bool { return target == ErrNoSuchMember }
func (e noSuchMember) Unwrap() error        { return e.error }

// PeerURLsTakenError refuses a new member whose peer URLs a member other than the one it
// replaces holds: etcd refuses such an add, and replace would find that out only after the
// remove. It is ErrRefused; Holder says which member holds them.
type PeerURLsTakenError struct {
	URLs    []string
	Holder  etcdmedic.Member
	NewName string
}

func (e *PeerURLsTakenError) Error() string {
	msg := fmt.Sprintf("%v: the new member's peer URLs %s belong to member %s, %s: give %s peer URLs of its own",
		ErrRefused, strings.Join(e.URLs, ","), e.Holder.Label(), memberKind(e.Holder), e.NewName)
	if e.Holder.Name == e.NewName && !e.Holder.IsLearner {
		msg += " (or, if it is the new member, this replacement is done already: check with etcdmedic doctor)"
	}
	return msg
}

func (e *PeerURLsTakenError) Unwrap() error { return ErrRefused }

// memberKind says what a member is, in the words of the membership.
func memberKind(m etcdmedic.Member) string {
	switch {
	case m.Name == "" && m.IsLearner:
		return "a learner never started"
	case m.Name == "":
		return "a voter never started"
	case m.IsLearner:
		return "a started learner"
	}
	return "a started voter"
}

// checkOldGone decides whether replace may go on without OLD in the membership: only when an
// earlier run of this same replace removed it, as shown by the new member already added
// (exactly its peer URLs) or by the record that run wrote just before its remove. It returns
// that evidence, for the operator.
func checkOldGone(v *cluster.View, old string, spec JoinSpec, rec *replaceRecord) (string, error) {
	if m := addedEarlier(v, spec.PeerURLs); m != nil {
		return fmt.Sprintf("member %s has the new member's peer URLs %s", m.Label(), strings.Join(spec.PeerURLs, ",")), nil
	}
	if rec.shows(v, old, spec) {
		return fmt.Sprintf("the earlier run recorded removing %s", rec.Old.Label()), nil
	}
	return "", noSuchMember{fmt.Errorf("%w: no member %q in the cluster (members: %s), and nothing shows that an earlier run of this replace removed it (no member has the peer URLs %s, no record of it in the backup dir): check the name or ID; if it was removed some other way, add the new member with etcdmedic member add",
		ErrRefused, old, memberNames(v), strings.Join(spec.PeerURLs, ","))}
}

// addedEarlier is the member whose peer URLs are exactly urls: the one an earlier run of the
// same replace (or add) added, learner or voter, started or not.
func addedEarlier(v *cluster.View, urls []string) *cluster.MemberView {
	for i, m := range v.Members {
		if sameURLs(m.PeerURLs, urls) {
			return &v.Members[i]
		}
	}
	return nil
}

// checkPeerURLsFree refuses the new member's peer URLs when a member other than the one it
// replaces (target, nil when already removed) holds one of them, unless that member is the
// record an earlier run of this same replace added and Join goes on from, or the member an
// earlier run started on the new data dir (started, NoID when none; see startedEarlier).
func checkPeerURLsFree(v *cluster.View, target *cluster.MemberView, spec JoinSpec, started etcdmedic.ID) error {
	for _, m := range v.Members {
		if !m.PeerURLs.Overlap(spec.PeerURLs) || (target != nil && m.ID == target.ID) || joinGoesOnFrom(m.Member, spec) ||
			(started != etcdmedic.NoID && m.ID == started) {
			continue
		}
		return &PeerURLsTakenError{URLs: spec.PeerURLs, Holder: m.Member, NewName: spec.Name}
	}
	return nil
}

// joinGoesOnFrom reports whether m is what Join added for spec and can go on from: exactly
// spec's peer URLs, and either never started (no name yet) or a learner started as spec.Name.
func joinGoesOnFrom(m etcdmedic.Member, spec JoinSpec) bool {
	return sameURLs(m.PeerURLs, spec.PeerURLs) && (m.Name == "" || (m.IsLearner && m.Name == spec.Name))
}

// sameURLs reports whether a and b hold the same URLs, in any order (etcd sorts peer URLs).
func sameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return len(a) > 0 && slices.Equal(slices.Compact(a), slices.Compact(b))
}
