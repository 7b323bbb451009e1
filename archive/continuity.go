package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrWentBack is a capture whose cluster no longer has the history it captured: the cluster
// was restored to an earlier point underneath it (a snapshot restore, a data dir put back) and
// goes on under revision numbers already captured, or another cluster answers at its
// endpoints. Stored onto the history captured so far, its changes would make a restore
// replay two timelines as one: what follows belongs to a new generation, from a new full
// backup.
var ErrWentBack = errors.New("the cluster's history is not the one captured")

// continuity holds a capture to one history of one cluster, from what the cluster itself
// says, and from a few reads a second:
//   - every response carries the cluster's ID: it must not change;
//   - linearizable reads every second, of the anchor, the one unverified and the newest change
//     received (puts and deletes), each at its revision, find those changes there, and the
//     cluster's newest revision never below a revision already received (checkRevision);
//   - every key's changes are numbered: a put of a key the capture saw is its next version,
//     since the same creation (or version 1 after a delete), and a key created after the
//     capture began was seen being created (event).
//
// A cluster restored to an earlier point breaks the second as soon as it is back (before it
// passes the revisions captured, by its revision; after, by the change it holds at the
// revision of a change read back, unless compacted) and the third at the first change to a key
// whose history differs.
type continuity struct {
	// clusterID is the cluster's (0: the first response's).
	clusterID uint64
	// since is the revision after which every change was received and tracked: a key created
	// after it and not tracked was created in a history the capture did not see.
	since int64
	keys  map[string]keyHistory
	// maxKeys bounds keys (maxTrackedKeys).
	maxKeys int
	// witnesses are the changes each check reads back (checkRevision).
	witnesses
	// response counts the watch responses; member and term are the last one's sender.
	response     uint64
	member, term uint64
	// unchecked counts the revision checks in a row that got no answer, checkErr the last
	// one's error: a check that never answers (a learner endpoint, no read permission) is said.
	unchecked int
	checkErr  error
}

// keyHistory is what the capture saw of one key: its creation, its latest version and the
// revision of its latest change, whether that change deleted it, and the watch response it
// came in.
type keyHistory struct {
	created, version, mod int64
	deleted               bool
	response              uint64
}

// maxTrackedKeys bounds the memory continuity keeps (a key and about 60 bytes each: 16 MB for
// 128k keys of 64 bytes, more than a large Kubernetes cluster changes in a --full-every period):
// past it, it starts again from the latest revision received.
const maxTrackedKeys = 1 << 17

// newContinuity holds a capture from revision from to the history of cluster clusterID (0:
// whichever the first response is from).
func newContinuity(from int64, clusterID uint64) *continuity {
	return &continuity{since: from, clusterID: clusterID, keys: map[string]keyHistory{}, maxKeys: maxTrackedKeys}
}

// header checks a response's cluster ID against the first one seen.
func (c *continuity) header(h *etcdserverpb.ResponseHeader) error {
	if h == nil || h.ClusterId == 0 {
		return nil
	}
	if c.clusterID == 0 {
		c.clusterID = h.ClusterId
		return nil
	}
	if h.ClusterId != c.clusterID {
		return fmt.Errorf("%w: cluster %x answers where cluster %x did", ErrWentBack, h.ClusterId, c.clusterID)
	}
	return nil
}

// watchResponse notes a watch response's sender before its changes. Another member or raft
// term than the last response's (the watch resumed after a cut, maybe on a member restored
// meanwhile, or behind an address switched to another cluster) makes the newest change
// received the unverified one, unless one is already: the checks read it back until one
// answers.
func (c *continuity) watchResponse(h *etcdserverpb.ResponseHeader) {
	c.response++
	if h == nil {
		return
	}
	if c.member != 0 && (h.MemberId != c.member || h.RaftTerm != c.term) && c.unverified == nil {
		c.unverified = c.newest
	}
	c.member, c.term = h.MemberId, h.RaftTerm
}

// event checks one change against what the capture saw of its key, then records it. A change
// of a key before the revision of the key's latest change received, or at it in another watch
// response, is a replay (etcd watch bugs have sent events twice, #17247; one revision's changes
// always come in one response): it is reported as such, and is no evidence.
func (c *continuity) event(ev *clientv3.Event) (replay bool, err error) {
	kv := ev.Kv
	key := string(kv.Key)
	seen, tracked := c.keys[key]
	if tracked && (kv.ModRevision < seen.mod || kv.ModRevision == seen.mod && (seen.response != c.response || seen.same(ev))) {
		return true, nil
	}
	if ev.Type == mvccpb.DELETE {
		if tracked && seen.deleted {
			return false, c.broken(kv.ModRevision, key, "deleted again, though its last change deleted it")
		}
		// Just before its deletion the key was there: changed last where the capture saw it
		// change, or (not seen) at all; not known when it was changed at the same revision,
		// or forgotten there.
		before := int64(0)
		switch {
		case tracked && seen.mod == kv.ModRevision, !tracked && kv.ModRevision <= c.since:
			before = -1
		case tracked:
			before = seen.mod
		}
		c.track(key, keyHistory{deleted: true, mod: kv.ModRevision}, kv.ModRevision)
		c.newest = &heldChange{key: kv.Key, revision: kv.ModRevision, deleted: true, before: before}
		return false, nil
	}
	switch {
	case tracked && seen.deleted && kv.Version != 1:
		return false, c.broken(kv.ModRevision, key, fmt.Sprintf("at version %d, though its last change deleted it", kv.Version))
	case tracked && !seen.deleted && (kv.CreateRevision != seen.created || kv.Version != seen.version+1):
		return false, c.broken(kv.ModRevision, key, fmt.Sprintf("at version %d created at revision %d, though the capture saw version %d created at revision %d", kv.Version, kv.CreateRevision, seen.version, seen.created))
	case !tracked && kv.CreateRevision > c.since && kv.CreateRevision < kv.ModRevision:
		return false, c.broken(kv.ModRevision, key, fmt.Sprintf("created at revision %d, a change the capture never received", kv.CreateRevision))
	}
	c.track(key, keyHistory{created: kv.CreateRevision, version: kv.Version, mod: kv.ModRevision}, kv.ModRevision)
	c.newest = putOf(kv)
	return false, nil
}

// same reports whether ev is the change h records (an etcd watch sending it again), not a
// second change of the key at the same revision (a transaction may put a key and delete it
// with a from-key range, #16380).
func (h keyHistory) same(ev *clientv3.Event) bool {
	if ev.Type == mvccpb.DELETE {
		return h.deleted
	}
	return !h.deleted && ev.Kv.Version == h.version && ev.Kv.CreateRevision == h.created
}

// track records key's history. Past maxTrackedKeys it starts again: every key created after
// rev is seen from then on (not rev-1: keys a transaction at rev created before this one were
// forgotten with the rest).
func (c *continuity) track(key string, h keyHistory, rev int64) {
	if len(c.keys) >= c.maxKeys {
		c.keys, c.since = map[string]keyHistory{}, rev
	}
	h.response = c.response
	c.keys[key] = h
}

func (c *continuity) broken(rev int64, key, why string) error {
	return fmt.Errorf("%w (restored to an earlier point, or changes lost): the change at revision %d has key %q %s", ErrWentBack, rev, key, why)
}

// checkRevision asks the cluster (linearizable reads) for the anchor, the unverified and the
// newest change received, each at its revision (see heldBy): a cluster below a revision
// received, or holding another change there, fails it. With none (or all compacted away) it
// asks only for the newest revision, which must not be below seen, the newest revision the
// capture received. A cluster that does not answer now is not judged, and the newest change
// then becomes the unverified one, unless one is already. A check that got an answer makes the
// newest change it read the anchor.
func (c *continuity) checkRevision(ctx context.Context, cli *clientv3.Client, seen int64) error {
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	newest := c.newest
	resp, err := c.read(gctx, cli)
	if errors.Is(err, ErrWentBack) {
		return err
	}
	if err != nil {
		c.unchecked, c.checkErr = c.unchecked+1, err
		if c.unverified == nil {
			c.unverified = newest
		}
		return nil
	}
	c.unchecked = 0
	if err := c.header(resp.Header); err != nil {
		return err
	}
	if resp.Header != nil && resp.Header.Revision < seen {
		return fmt.Errorf("%w: the cluster is at revision %d, below revision %d the capture received (restored to an earlier point?)", ErrWentBack, resp.Header.Revision, seen)
	}
	c.unverified = nil
	if newest != nil && newest == c.newest { // not let go of (compacted)
		c.anchor = newest
	}
	return nil
}

// read asks the check's questions: the witnesses, each at its revision. A change compacted
// away tells nothing more and is let go of; with none left, a count of nothing answers the
// revision alone.
func (c *continuity) read(ctx context.Context, cli *clientv3.Client) (*clientv3.GetResponse, error) {
	var answer *clientv3.GetResponse
	for _, p := range c.all() {
		resp, err := p.heldBy(ctx, cli, false)
		switch {
		case errors.Is(err, errChangeCompacted):
			c.letGo(p)
		case err != nil:
			return nil, err
		default:
			answer = resp
		}
	}
	if answer != nil {
		return answer, nil
	}
	return cli.Get(ctx, "\x00", clientv3.WithCountOnly())
}
