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
		return fmt.Errorf("%w: the cluster has no quorum (%d of %d voters up): a membership change cannot commit; recover quorum first (etcdmedic recover)", ErrRefused, v.Quorum.VotersUp, v.Quorum.Voters)
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
		return nil, fmt.Errorf("%w: no member %q (members: %s)", ErrRefused, nameOrID, memberNames(v))
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
	voters, up := v.Quorum.Voters-1, v.Quorum.VotersUp
	if m.Up() {
		up--
	}
	if needed := voters/2 + 1; up < needed {
		return fmt.Errorf("%w: removing %s (%s) would leave %d of %d voters up, %d are needed: bring a down member back first", ErrRefused, m.Label(), upOrDown(m), up, voters, needed)
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
