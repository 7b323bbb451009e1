package upgrade

import (
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
)

// CannotSpareError says why a hop step did not stop its member: the cluster, as seen just
// before, could not do without it. Nothing was stopped; a rerun goes on once it can.
type CannotSpareError struct {
	Member string
	// NotServing are the other members of the plan that are not up and serving.
	NotServing []string
	// Leaders is how many different leaders the members name (1 is healthy).
	Leaders int
	// VotersServing are the voters other than Member that serve; Needed is the quorum.
	VotersServing, Needed int
	// QuorumWithout: those voters are a quorum, or the cluster never had one to spare Member.
	QuorumWithout bool
}

func (e *CannotSpareError) Error() string {
	var why []string
	if len(e.NotServing) > 0 {
		why = append(why, "not up and serving: "+strings.Join(e.NotServing, ", "))
	}
	switch {
	case e.Leaders == 0:
		why = append(why, "no member knows a leader")
	case e.Leaders > 1:
		why = append(why, fmt.Sprintf("the members name %d different leaders", e.Leaders))
	}
	if !e.QuorumWithout {
		why = append(why, fmt.Sprintf("without %s %d voter(s) would serve, %d are needed", e.Member, e.VotersServing, e.Needed))
	}
	return fmt.Sprintf("the cluster cannot spare %s now (%s): nothing was stopped; run apply again once the cluster is healthy (etcdmedic doctor shows what is wrong)",
		e.Member, strings.Join(why, "; "))
}

// canSpare decides whether the cluster in v can do without member name while it restarts:
// every other member of the plan up and serving, exactly one leader, and the voters serving
// without it still a quorum. The member itself may be down: a rerun finds it so when an earlier
// run had stopped it, or restarted it on the new binary, before it was interrupted.
func canSpare(v *cluster.View, members []Member, name string) error {
	e := &CannotSpareError{Member: name, NotServing: missing(v, members, name, serving),
		Leaders: len(v.Leaders), Needed: v.Quorum.Needed}
	others := 0
	for _, m := range v.Members {
		if m.IsLearner || m.Name == name {
			continue
		}
		others++
		if serving(m) {
			e.VotersServing++
		}
	}
	// One or two voters never have a quorum to spare: each restart costs an outage however it
	// is done, so there it is enough that every other voter serves.
	e.QuorumWithout = e.VotersServing >= e.Needed || (others < e.Needed && e.VotersServing == others)
	if len(e.NotServing) > 0 || e.Leaders != 1 || !e.QuorumWithout {
		return e
	}
	return nil
}

// serving: the member answers and follows the leader. A voter must also pass a linearizable
// read; a learner refuses those (etcd serves learners serializable reads only).
func serving(m cluster.MemberView) bool {
	if !m.Up() || m.Probe.Status.Leader == etcdmedic.NoID {
		return false
	}
	return m.IsLearner || m.Probe.Healthy
}

func isUp(m cluster.MemberView) bool { return m.Up() }

// NotWholeError says which members of the plan are not up after a hop (or a reboot).
type NotWholeError struct {
	Down []string
	// VotersUp are the voters up in the cluster; Voters, the plan's voters.
	VotersUp, Voters int
}

func (e *NotWholeError) Error() string {
	s := fmt.Sprintf("%d of %d voters up", e.VotersUp, e.Voters)
	if len(e.Down) > 0 {
		s += ", not up: " + strings.Join(e.Down, ", ")
	}
	return s
}

// wholeCluster decides whether every member of the plan, learners too, is up, with as many
// voters up as the plan has voters: a learner is a member to wait for, never a voter to count.
func wholeCluster(v *cluster.View, members []Member) error {
	e := &NotWholeError{Down: missing(v, members, "", isUp), VotersUp: v.Quorum.VotersUp}
	for _, m := range members {
		if mv := v.ByName(m.Name); mv == nil || !mv.IsLearner {
			e.Voters++ // one the membership no longer shows is down, and counted as a voter
		}
	}
	if len(e.Down) > 0 || e.VotersUp != e.Voters {
		return e
	}
	return nil
}

// missing names the members of the plan, but except, that the view does not show ok.
func missing(v *cluster.View, members []Member, except string, ok func(cluster.MemberView) bool) []string {
	var out []string
	for _, m := range members {
		if m.Name == except {
			continue
		}
		if mv := v.ByName(m.Name); mv == nil || !ok(*mv) {
			out = append(out, m.Name)
		}
	}
	return out
}
