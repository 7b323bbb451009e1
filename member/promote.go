package member

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// PromoteOptions name the learner to promote.
type PromoteOptions struct {
	Conn    cluster.Conn
	Learner string // its name or hex ID
	// CatchUp bounds the wait until etcd accepts the promotion (2 minutes when 0).
	CatchUp time.Duration
}

// Promoted says which learner became a voter.
type Promoted struct {
	Member etcdmedic.Member `json:"member"` // as it is now: a voter
}

// Promote promotes a learner once it has caught up, writing a harmless key meanwhile so that
// it cannot stall (see Joiner.PromoteWhenReady); refused when there is no such learner.
func Promote(ctx context.Context, opts PromoteOptions) (*Promoted, error) {
	m, err := checkPromote(cluster.ObserveElected(ctx, opts.Conn), opts.Learner)
	if err != nil {
		return nil, err
	}
	cli, err := opts.Conn.Client()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer cli.Close()
	j := &Joiner{Client: cli, CatchUp: opts.CatchUp}
	if err := j.PromoteWhenReady(ctx, uint64(m.ID)); err != nil {
		return nil, err
	}
	promoted := m.Member
	promoted.IsLearner = false
	return &Promoted{Member: promoted}, nil
}
