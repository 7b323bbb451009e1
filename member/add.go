package member

import (
	"context"
	"io"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// AddOptions are one `member add`: the cluster, the joiner that adds and (with a runtime)
// starts and promotes the member, and the member to add.
type AddOptions struct {
	Conn   cluster.Conn
	Joiner *Joiner
	Spec   JoinSpec
	Out    io.Writer // progress, as lines of text
}

// Add adds a member as a learner: refused without quorum or while another learner is
// pending; any data in its data dir is quarantined first (moved aside, never deleted); then the
// joiner adds it and, when it can start it, waits until it has caught up and promotes it.
// The caller holds the data dir's run lock.
func Add(ctx context.Context, o AddOptions) (*Replaced, error) {
	if err := CheckChange(cluster.ObserveElected(ctx, o.Conn), o.Spec.PeerURLs); err != nil {
		return nil, err
	}
	out := &Replaced{}
	if o.Spec.DataDir != "" {
		r := &Replacer{Conn: o.Conn, Out: o.Out}
		q, err := r.GuardDataDir(ctx, o.Spec)
		if err != nil {
			return nil, err
		}
		out.Quarantined = q
	}
	res, err := o.Joiner.Join(ctx, o.Spec)
	if res != nil {
		out.Plan, out.Joined = res.Steps, res
		return out, err
	}
	return nil, err
}
