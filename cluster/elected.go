package cluster

import (
	"context"
	"time"
)

// electionWait bounds how long ObserveElected waits for an election to settle: etcd's
// randomized election timeout is one to two election timeouts (1 to 2 s by default), and a
// pre-vote round that fails adds another.
const electionWait = 5 * time.Second

// electionPoll is how often ObserveElected looks again.
const electionPoll = 250 * time.Millisecond

// ObserveElected observes the cluster (see Observe), and again, for up to electionWait, while
// its view shows an election under way: quorum not verified, with enough voters answering to
// make one, some of them knowing no leader (as just after the leader died). A membership
// decision taken on that view would refuse, for want of quorum, what a moment later it
// allows, and name recover (for quorum loss) as the next step.
func ObserveElected(ctx context.Context, conn Conn) *View {
	deadline := time.Now().Add(electionWait)
	for {
		v := Observe(ctx, conn)
		if !v.Quorum.electing() || !time.Now().Add(electionPoll).Before(deadline) {
			return v
		}
		select {
		case <-ctx.Done():
			return v
		case <-time.After(electionPoll):
		}
	}
}

// electing reports whether q shows an election under way rather than quorum lost: not
// verified, some voters answering without being in the quorum, and enough answering to make
// one.
func (q Quorum) electing() bool {
	return q.Lost() && q.CutOff > 0 && q.VotersUp >= q.Needed
}
