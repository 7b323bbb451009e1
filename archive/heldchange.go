package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldChange is a change a capture received (a put, or a delete), as the cluster must still
// hold it at its revision while its history is the one captured: the key with that value,
// version, creation and lease; or no key there, and the key just before (changed last at
// revision before; 0: not known when; -1: not known to be there), so that the deletion at
// that very revision is what is read back, not any absence.
type heldChange struct {
	key, value                        []byte
	revision, created, version, lease int64
	deleted                           bool
	before                            int64
}

// witnesses are the changes a capture reads back, each at its revision (see continuity).
type witnesses struct {
	// newest is the newest change received (the last of its revision: what the cluster holds
	// there; a revision's changes come in one watch response, and checks run between them).
	// anchor is the newest change when the last check that got an answer was sent, or the
	// previous capture's newest. unverified is the newest change when a check first got no
	// answer since then, or a watch response came from another member or term (a cut
	// connection, a member stopped: received before the cut, it is the history captured).
	// Every check reads all three back: a change of a new history received before a check
	// can object never takes their place unchecked.
	newest, anchor, unverified *heldChange
}

// all returns the witnesses to read back, each once: the anchor, the unverified, the newest.
func (w witnesses) all() []*heldChange {
	var out []*heldChange
	for _, p := range []*heldChange{w.anchor, w.unverified, w.newest} {
		if p != nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// letGo forgets a change whose revision is compacted away, and every change below it.
func (w *witnesses) letGo(p *heldChange) {
	for _, q := range []**heldChange{&w.anchor, &w.unverified, &w.newest} {
		if *q != nil && (*q).revision <= p.revision {
			*q = nil
		}
	}
}

func putOf(kv *mvccpb.KeyValue) *heldChange {
	return &heldChange{key: kv.Key, value: kv.Value, revision: kv.ModRevision, created: kv.CreateRevision, version: kv.Version, lease: kv.Lease}
}

// largeValue is the size above which the check each second reads a put's key and numbers,
// not its value (a Kubernetes object may be 1.5 MiB; the check between captures reads it all).
const largeValue = 64 << 10

// errChangeCompacted is a change's revision compacted away: what the cluster holds there is
// not known any more.
var errChangeCompacted = errors.New("the revision of the change is compacted")

// wentBackAt is ErrWentBack shown by a change the cluster no longer holds: every change
// received at or below its revision came before it, from the history captured; what came
// after may be the new history's.
type wentBackAt struct {
	revision int64
	why      string
}

func (e *wentBackAt) Error() string { return ErrWentBack.Error() + ": " + e.why }
func (e *wentBackAt) Unwrap() error { return ErrWentBack }

// heldBy reads p's key at p's revision (a linearizable read): the same creation, version and
// value there (for a delete, no key) is the history captured, and the response's header
// carries the cluster's newest revision. A cluster restored to an earlier point and gone on
// past that revision (even with changes only to keys the capture never saw) holds another
// change there; one still below it answers that the revision is in its future. Either is
// ErrWentBack; a revision compacted away is errChangeCompacted. With whole false, a large
// value is not read.
func (p *heldChange) heldBy(ctx context.Context, cli *clientv3.Client, whole bool) (*clientv3.GetResponse, error) {
	opts := []clientv3.OpOption{clientv3.WithRev(p.revision)}
	readValue := !p.deleted && (whole || len(p.value) <= largeValue)
	if !readValue {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	resp, err := cli.Get(ctx, string(p.key), opts...)
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrFutureRev):
		return nil, fmt.Errorf("%w: the cluster is below revision %d, where the capture received a change (restored to an earlier point?)", ErrWentBack, p.revision)
	case errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted):
		return nil, errChangeCompacted
	case err != nil:
		return nil, err
	}
	if p.deleted {
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			return nil, p.notHeld(fmt.Sprintf("holds the key there (version %d created at revision %d, changed at %d), where the capture received its deletion", kv.Version, kv.CreateRevision, kv.ModRevision))
		}
		if err := p.thereBefore(ctx, cli); err != nil {
			return nil, err
		}
		return resp, nil
	}
	if len(resp.Kvs) == 0 {
		return nil, p.notHeld("holds no such key there")
	}
	kv := resp.Kvs[0]
	switch {
	case kv.ModRevision != p.revision || kv.CreateRevision != p.created || kv.Version != p.version:
		return nil, p.notHeld(fmt.Sprintf("holds version %d created at revision %d, changed at %d there", kv.Version, kv.CreateRevision, kv.ModRevision))
	case kv.Lease != p.lease:
		return nil, p.notHeld(fmt.Sprintf("holds it with lease %x there, not %x", kv.Lease, p.lease))
	case readValue && !bytes.Equal(kv.Value, p.value):
		return nil, p.notHeld("holds another value there")
	}
	return resp, nil
}

// thereBefore reads a deleted key just before its deletion: it must be there, changed last
// where the capture saw. A cluster with no such key there (created after the point it was
// restored to) holds no key at the deletion's revision either, without deleting it there. A
// revision compacted away leaves the deletion's own revision to tell.
func (p *heldChange) thereBefore(ctx context.Context, cli *clientv3.Client) error {
	if p.before < 0 || p.revision <= 1 {
		return nil
	}
	resp, err := cli.Get(ctx, string(p.key), clientv3.WithRev(p.revision-1), clientv3.WithKeysOnly())
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted):
		return nil
	case err != nil:
		return err
	case len(resp.Kvs) == 0:
		return p.notHeld("holds no such key just before it, to be deleted there")
	case p.before > 0 && resp.Kvs[0].ModRevision != p.before:
		return p.notHeld(fmt.Sprintf("holds the key changed last at revision %d just before it, where the capture saw its last change at %d", resp.Kvs[0].ModRevision, p.before))
	}
	return nil
}

func (p *heldChange) notHeld(why string) error {
	return &wentBackAt{revision: p.revision, why: fmt.Sprintf("at revision %d the cluster no longer holds the change to %q the capture received there: it %s (restored to an earlier point?)", p.revision, p.key, why)}
}

// stillHolds checks, between two captures of one history, that the cluster still holds a
// change the last one received (see heldBy), value and all. A revision compacted away, or
// no answer, tells nothing here: the next capture goes on checking it each second.
func stillHolds(ctx context.Context, cli *clientv3.Client, last *heldChange) error {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := last.heldBy(gctx, cli, true); errors.Is(err, ErrWentBack) {
		return err
	}
	return nil
}
