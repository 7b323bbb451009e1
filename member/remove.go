package member

import (
	"context"
	"fmt"

	"github.com/etcdmedic/etcdmedic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// RemoveOptions name the member to remove.
type RemoveOptions struct {
	Conn   cluster.Conn
	Member string // its name or hex ID
	// DryRun checks the removal and changes nothing.
	DryRun bool
}

// Removed says which member was removed (or, on a dry run, would be).
type Removed struct {
	Member etcdmedic.Member `json:"member"`
	DryRun bool             `json:"dryRun"`
	// Command is the change as etcdctl makes it.
	Command string   `json:"command"`
	Next    []string `json:"next"`
}

// RemoveSafely removes a member, refused (changing nothing) when no member answers, the
// cluster has no quorum, or the removal would leave fewer voters up than a quorum.
func RemoveSafely(ctx context.Context, opts RemoveOptions) (*Removed, error) {
	m, err := CheckRemove(cluster.ObserveElected(ctx, opts.Conn), opts.Member)
	if err != nil {
		return nil, err
	}
	out := &Removed{Member: m.Member, DryRun: opts.DryRun, Command: fmt.Sprintf("etcdctl member remove %s", m.ID), Next: []string{}}
	if opts.DryRun {
		return out, nil
	}
	cli, err := opts.Conn.Client()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer cli.Close()
	if err := Remove(ctx, cli, m.ID); err != nil {
		return nil, fmt.Errorf("member remove %s: %w", m.ID, err)
	}
	out.Next = append(out.Next, "Its data dir is untouched: quarantine it before reusing the volume (etcdmedic guard --fix).")
	return out, nil
}

// Remove removes a member by ID, retrying etcd's "unhealthy cluster" refusals.
func Remove(ctx context.Context, cli *clientv3.Client, id etcdmedic.ID) error {
	_, err := retryUnhealthy(ctx, func(ctx context.Context) (*clientv3.MemberRemoveResponse, error) {
		return cli.MemberRemove(ctx, uint64(id))
	})
	return err
}
