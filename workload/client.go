package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// client is one of the workload's clients: its own connection, its own kept-alive lease, and
// what it last saw of each shared key (for its compare-and-swaps).
type client struct {
	w      *Workload
	id     int
	cli    *clientv3.Client
	rng    *rand.Rand
	nonce  string
	seq    int
	lease  *Lease // kept alive; nil when the grant failed
	expiry *Lease // left to expire; nil when the grant failed
	// seen is the mod revision this client last saw for each shared key (0: absent).
	seen map[string]int64
}

func newClient(w *Workload, id int, cli *clientv3.Client, nonce string) *client {
	return &client{
		w: w, id: id, cli: cli, nonce: nonce,
		rng:  rand.New(rand.NewPCG(w.spec.Seed, uint64(id))),
		seen: map[string]int64{},
	}
}

// expiringPuts is how many keys each client attaches to its lease left to expire.
const expiringPuts = 2

func (c *client) run(ctx context.Context) {
	c.lease = c.grant(ctx, c.w.spec.LeaseTTL, true)
	c.expiry = c.grant(ctx, c.w.spec.ExpiringLeaseTTL, false)
	for i := 0; ctx.Err() == nil; i++ {
		c.w.gate.RLock() // held for one operation: Pause waits for it
		if ctx.Err() == nil {
			c.step(ctx, i)
		}
		c.w.gate.RUnlock()
	}
}

// step is the client's i-th operation, drawn from the mix.
func (c *client) step(ctx context.Context, i int) {
	switch r := c.rng.IntN(100); {
	case i < expiringPuts && c.expiry != nil:
		c.put(ctx, c.leaseKey("expiring"), c.expiry.ID)
	case r < 25:
		c.put(ctx, c.sharedKey(), 0)
	case r < 33:
		c.delete(ctx, c.sharedKey())
	case r < 58:
		c.compareAndSwap(ctx, c.sharedKey())
	case r < 93:
		c.get(ctx, c.sharedKey())
	case c.lease != nil:
		c.put(ctx, c.leaseKey("kept"), c.lease.ID)
	}
}

func (c *client) sharedKey() string {
	return fmt.Sprintf("%sshared/%02d", c.w.spec.Prefix, c.rng.IntN(c.w.spec.SharedKeys))
}

// leaseKey is a key of its own for each lease-attached put: only the lease can remove it.
func (c *client) leaseKey(kind string) string {
	return fmt.Sprintf("%slease/%s/c%d/%06d", c.w.spec.Prefix, kind, c.id, c.seq)
}

// value is unique per write in the workload, so a read names the write it saw.
func (c *client) value() string {
	c.seq++
	return fmt.Sprintf("%s-c%d-%d", c.nonce, c.id, c.seq)
}

// grant grants a lease; keepAlive keeps it alive until the workload stops and records when the
// keep-alive stream ends early.
func (c *client) grant(ctx context.Context, ttl int64, keepAlive bool) *Lease {
	rctx, cancel := context.WithTimeout(ctx, c.w.spec.RequestTimeout)
	defer cancel()
	resp, err := c.cli.Grant(rctx, ttl)
	if err != nil {
		return nil
	}
	l := &Lease{Client: c.id, ID: int64(resp.ID), TTL: resp.TTL}
	c.w.addLease(l)
	if !keepAlive {
		return l
	}
	// Kept alive until the watchers have caught up at Stop, after the clients stopped: a lease
	// that expired while Stop waited would take keys the checker expects.
	life := c.w.life
	ch, err := c.cli.KeepAlive(life, resp.ID)
	if err != nil {
		return l
	}
	c.w.mu.Lock()
	l.KeptAlive = true
	c.w.mu.Unlock()
	c.w.wg.Go(func() {
		for range ch {
		}
		if life.Err() == nil { // the stream ended before Stop: the lease may expire
			c.w.mu.Lock()
			l.KeptAlive, l.LostAt = false, time.Now()
			c.w.mu.Unlock()
		}
	})
	return l
}

func (c *client) put(ctx context.Context, key string, lease int64) {
	op := Op{Client: c.id, Kind: Put, Key: key, Value: c.value(), Lease: lease}
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(lease)))
	}
	c.do(ctx, &op, func(rctx context.Context) error {
		resp, err := c.cli.Put(rctx, key, op.Value, opts...)
		if err == nil {
			op.Revision = resp.Header.Revision
			c.seen[key] = resp.Header.Revision
		}
		return err
	})
}

func (c *client) delete(ctx context.Context, key string) {
	op := Op{Client: c.id, Kind: Delete, Key: key}
	c.do(ctx, &op, func(rctx context.Context) error {
		resp, err := c.cli.Delete(rctx, key)
		if err == nil {
			op.Revision, op.Deleted = resp.Header.Revision, resp.Deleted
			c.seen[key] = 0
		}
		return err
	})
}

// compareAndSwap writes key if it is still as this client last saw it, as a Kubernetes update
// does with the resourceVersion it read.
func (c *client) compareAndSwap(ctx context.Context, key string) {
	op := Op{Client: c.id, Kind: CompareAndSwap, Key: key, Value: c.value(), ExpectModRevision: c.seen[key]}
	c.do(ctx, &op, func(rctx context.Context) error {
		resp, err := c.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", op.ExpectModRevision)).
			Then(clientv3.OpPut(key, op.Value)).
			Commit()
		if err == nil {
			op.Revision, op.Succeeded = resp.Header.Revision, resp.Succeeded
			if resp.Succeeded {
				c.seen[key] = resp.Header.Revision
			}
		}
		return err
	})
}

func (c *client) get(ctx context.Context, key string) {
	op := Op{Client: c.id, Kind: Get, Key: key}
	c.do(ctx, &op, func(rctx context.Context) error {
		resp, err := c.cli.Get(rctx, key)
		if err == nil {
			op.Revision = resp.Header.Revision
			if len(resp.Kvs) > 0 {
				op.Found, op.ReadValue, op.ModRevision = true, string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
			}
			c.seen[key] = op.ModRevision
		}
		return err
	})
}

// do runs one request within the request timeout and records it with its outcome. An
// operation not sent because the workload stopped is not recorded.
func (c *client) do(ctx context.Context, op *Op, send func(context.Context) error) {
	if ctx.Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, c.w.spec.RequestTimeout)
	defer cancel()
	op.Start = time.Now()
	err := send(rctx)
	op.End = time.Now()
	op.Outcome = outcomeOf(op.Kind, err)
	if err != nil {
		op.Err = err.Error()
	}
	c.w.record(*op)
}

// refusedBeforeProposal are errors etcd returns before it proposes a write: it never applies.
var refusedBeforeProposal = []error{
	rpctypes.ErrLeaseNotFound,
	rpctypes.ErrNoSpace,
	rpctypes.ErrRequestTooLarge,
	rpctypes.ErrTooManyOps,
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrUserEmpty,
}

// outcomeOf classifies a request's error: none is OK, a failed read changed nothing, a write
// etcd refused before proposing it failed, and any other write error (a timeout, a lost
// connection, a leader change) leaves the write possibly applied.
func outcomeOf(kind Kind, err error) Outcome {
	if err == nil {
		return OK
	}
	if kind == Get {
		return Failed
	}
	for _, refused := range refusedBeforeProposal {
		if errors.Is(err, refused) {
			return Failed
		}
	}
	return Indeterminate
}
