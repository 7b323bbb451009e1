package archive

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultLeaseTTL is granted, in a replay, to a lease whose TTL the capture could not learn (it
// was gone when asked): its keys are deleted later in the history anyway.
const defaultLeaseTTL = 60

// replayOnto applies events to a scratch member, one revision per transaction, so that every
// revision keeps its number, and every key keeps its lease: each lease is granted with its ID
// and TTL before its first key, and every lease (those restored from the backup too) is kept
// alive until ctx ends, since a lease expiring in the scratch member would write a revision the
// history does not have.
func replayOnto(ctx context.Context, cli *clientv3.Client, events []Event) error {
	leases, err := cli.Leases(ctx)
	if err != nil {
		return fmt.Errorf("the scratch member's leases: %w", err)
	}
	granted := map[int64]bool{}
	for _, l := range leases.Leases {
		if err := keepAlive(ctx, cli, l.ID); err != nil {
			return err
		}
		granted[int64(l.ID)] = true
	}
	lc := clientv3.RetryLeaseClient(cli)
	for i := 0; i < len(events); {
		rev := events[i].Revision
		var ops []clientv3.Op
		for ; i < len(events) && events[i].Revision == rev; i++ {
			e := events[i]
			if e.Delete {
				ops = append(ops, clientv3.OpDelete(string(e.Key)))
				continue
			}
			var opts []clientv3.OpOption
			if e.Lease != 0 {
				if !granted[e.Lease] {
					ttl := e.LeaseTTL
					if ttl <= 0 {
						ttl = defaultLeaseTTL
					}
					_, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: e.Lease, TTL: ttl})
					if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
						return fmt.Errorf("replay revision %d: grant lease %x: %w", rev, e.Lease, err)
					}
					if err := keepAlive(ctx, cli, clientv3.LeaseID(e.Lease)); err != nil {
						return err
					}
					granted[e.Lease] = true
				}
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(e.Lease)))
			}
			ops = append(ops, clientv3.OpPut(string(e.Key), string(e.Value), opts...))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("replay revision %d: %w", rev, err)
		}
		if resp.Header.Revision != rev {
			return fmt.Errorf("replaying revision %d made revision %d: the history does not follow the backup", rev, resp.Header.Revision)
		}
	}
	return nil
}

// keepAlive keeps lease alive in the scratch member until ctx ends.
func keepAlive(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	ch, err := cli.KeepAlive(ctx, lease)
	if err != nil {
		return fmt.Errorf("keep lease %x alive in the scratch member: %w", lease, err)
	}
	go func() {
		for range ch {
		}
	}()
	return nil
}
