package archive

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

func put(key string, rev, created, version int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev, CreateRevision: created, Version: version}}
}

// created is a key's first put, value and all, at revision rev.
func created(key, value string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), ModRevision: rev, CreateRevision: rev, Version: 1}}
}

func del(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// What a capture from revision 100 receives, and whether it is still the history it captured.
// Each row is a situation a backup run meets: a cluster going on, or one restored to an earlier
// point underneath the run and going on under the same revision numbers.
func TestACaptureTellsItsHistoryFromAnother(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []*clientv3.Event
		wentOn bool // still the history captured
	}{
		{"a key created before the capture, then updated", []*clientv3.Event{put("a", 101, 50, 4), put("a", 102, 50, 5)}, true},
		{"a key created, updated, deleted, created again", []*clientv3.Event{put("a", 101, 101, 1), put("a", 102, 101, 2), del("a", 103), put("a", 104, 104, 1)}, true},
		{"a key first seen deleted, then created", []*clientv3.Event{del("a", 101), put("a", 102, 102, 1)}, true},
		{"a change sent twice (an etcd watch bug): the replay is skipped", []*clientv3.Event{put("a", 101, 50, 4), put("a", 101, 50, 4), del("b", 102), del("b", 102), put("a", 103, 50, 5)}, true},
		{"two keys in one transaction", []*clientv3.Event{put("a", 101, 101, 1), put("b", 101, 101, 1), put("a", 102, 101, 2)}, true},
		{"restored: a key's next version skips one", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 50, 6)}, false},
		{"restored: a key's version goes back", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 50, 3)}, false},
		{"restored: a key created again elsewhere", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 105, 2)}, false},
		{"restored: a deleted key back at version 3", []*clientv3.Event{del("a", 101), put("a", 110, 60, 3)}, false},
		{"restored: a deleted key deleted again", []*clientv3.Event{del("a", 101), del("a", 110)}, false},
		{"restored: a key created after the capture began, its creation never received", []*clientv3.Event{put("b", 110, 105, 2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newContinuity(100, 0)
			var err error
			for _, ev := range tc.events {
				if _, err = c.event(ev); err != nil {
					break
				}
			}
			if tc.wentOn && err != nil {
				t.Fatalf("one history taken for two: %v", err)
			}
			if !tc.wentOn && !errors.Is(err, ErrWentBack) {
				t.Fatalf("two histories taken for one: got %v, want ErrWentBack", err)
			}
		})
	}
}

// Another cluster answering at the endpoints (a restore under another --initial-cluster-token)
// is another history, whatever its revisions.
func TestACaptureTellsAnotherCluster(t *testing.T) {
	if err := newContinuity(100, 0xa).header(&etcdserverpb.ResponseHeader{ClusterId: 0xb, Revision: 140}); !errors.Is(err, ErrWentBack) {
		t.Fatalf("cluster b, the first to answer a capture of cluster a's history, taken for it: %v", err)
	}
	c := newContinuity(100, 0)
	if err := c.header(&etcdserverpb.ResponseHeader{ClusterId: 0xa, Revision: 120}); err != nil {
		t.Fatal(err)
	}
	if err := c.header(&etcdserverpb.ResponseHeader{ClusterId: 0xa, Revision: 130}); err != nil {
		t.Fatal(err)
	}
	if err := c.header(&etcdserverpb.ResponseHeader{ClusterId: 0xb, Revision: 140}); !errors.Is(err, ErrWentBack) {
		t.Fatalf("cluster b taken for cluster a: %v", err)
	}
}

// Past the keys it tracks, a capture starts again; a transaction that created two keys at the
// revision where it did is no evidence of a history not received (review of the change, 1: the
// second key's later change was taken for one).
func TestACaptureForgettingKeysMidTransactionTakesNoHistoryForAnother(t *testing.T) {
	c := newContinuity(100, 0)
	c.maxKeys = 2
	for _, ev := range []*clientv3.Event{put("x", 101, 101, 1), put("a", 110, 110, 1), put("b", 110, 110, 1), put("a", 111, 110, 2)} {
		if _, err := c.event(ev); err != nil {
			t.Fatal(err)
		}
	}
}

// Between two captures of one history no check runs (a full backup being taken, a store
// outage): the next capture first asks the cluster, at the revision of the changes the last
// one read back (here a put), for that key. The same change there: the history goes on. Another change there (a
// cluster restored to an earlier point and gone past it while no capture ran), or a revision
// the cluster has not reached: another history. A revision compacted away tells nothing.
func TestTheNextCaptureChecksTheClusterStillHoldsTheLastChange(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	resp, err := cli.Put(t.Context(), "/registry/pods/p0", "captured")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	captured := func(key, value string, rev, version int64) *heldChange {
		return &heldChange{key: []byte(key), value: []byte(value), revision: rev, created: rev, version: version}
	}
	for _, tc := range []struct {
		name   string
		last   *heldChange
		wentOn bool
	}{
		{"the change captured is there", captured("/registry/pods/p0", "captured", rev, 1), true},
		{"another change at its revision", captured("/registry/pods/p0", "the old history's", rev, 1), false},
		{"another version at its revision", captured("/registry/pods/p0", "captured", rev, 2), false},
		{"another key's change at its revision", captured("/registry/pods/p9", "captured", rev, 1), false},
		{"a revision the cluster has not reached", captured("/registry/pods/p0", "captured", rev+1000, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := stillHolds(t.Context(), cli, tc.last)
			if tc.wentOn != (err == nil) || (err != nil && !errors.Is(err, ErrWentBack)) {
				t.Fatalf("stillHolds: %v (want the history to go on: %v)", err, tc.wentOn)
			}
		})
	}
	for range 3 {
		if _, err := cli.Put(t.Context(), "/registry/pods/p1", "later"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(t.Context(), rev+2); err != nil {
		t.Fatal(err)
	}
	if err := stillHolds(t.Context(), cli, captured("/registry/pods/p0", "the old history's", rev, 1)); err != nil {
		t.Fatalf("a compacted revision tells nothing, but: %v", err)
	}
}

// The check each second reads back the anchor (the newest change when the last check that
// answered was sent, or the previous capture's) as well as the newest one. A put of a restored
// cluster's new history, received before a check could object, is held by that cluster: were
// it the only one read back, the restore would pass for the history captured. The anchor, a
// put the restored cluster does not hold, still tells them apart.
func TestAPutOfAnotherHistoryDoesNotHideTheOneCaptured(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	resp, err := cli.Put(t.Context(), "/registry/configmaps/c0", "the new history's")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	held := newContinuity(0, 0)
	// Captured and checked before the restore: a pod, at a revision where the cluster (as
	// restored) holds the config map.
	held.anchor = &heldChange{key: []byte("/registry/pods/p0"), value: []byte("captured"), revision: rev, created: rev - 1, version: 2}
	// Received after the restore, before a check: the config map, which the cluster holds.
	if _, err := held.event(created("/registry/configmaps/c0", "the new history's", rev)); err != nil {
		t.Fatal(err)
	}
	err = held.checkRevision(t.Context(), cli, rev)
	var at *wentBackAt
	if !errors.As(err, &at) || at.revision != rev {
		t.Fatalf("the check: %v; want the pod captured at revision %d no longer held", err, rev)
	}
	// With the history captured, the check answers, and the newest change becomes the anchor.
	held.anchor = nil
	if err := held.checkRevision(t.Context(), cli, rev); err != nil || held.anchor == nil || held.anchor.revision != rev {
		t.Fatalf("the check of the history captured: %v, anchor %+v", err, held.anchor)
	}
}

// etcd lets one transaction change a key twice at one revision (a put and a from-key delete,
// etcd #16380): the watch sends both changes. Neither is a replay of the other, and the check
// reads back the put the cluster still holds, not the one deleted at its own revision. Each
// used to end the capture as a cluster restored underneath it.
func TestAKeyChangedTwiceInOneTransactionIsNoOtherHistory(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx := t.Context()
	before, err := cli.Put(ctx, "/registry/pods/p0", "v")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wch := cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(before.Header.Revision+1))
	held := newContinuity(before.Header.Revision, 0)
	for _, ops := range [][]clientv3.Op{
		{clientv3.OpPut("/registry/leases/l0", "1"), clientv3.OpDelete("", clientv3.WithPrefix())},
		{clientv3.OpDelete("", clientv3.WithPrefix()), clientv3.OpPut("/registry/leases/l0", "2")},
		{clientv3.OpPut("/registry/leases/l0", "3")},
	} {
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatalf("this etcd refuses a key changed twice in one transaction: %v", err)
		}
		for got := false; !got; {
			select {
			case w := <-wch:
				for _, ev := range w.Events {
					if _, err := held.event(ev); err != nil {
						t.Fatalf("%s %s at revision %d: %v", ev.Type, ev.Kv.Key, ev.Kv.ModRevision, err)
					}
					got = got || ev.Kv.ModRevision == resp.Header.Revision
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watch sent nothing for the transaction")
			}
		}
		if err := held.checkRevision(ctx, cli, resp.Header.Revision); err != nil {
			t.Fatalf("after the transaction at revision %d: %v", resp.Header.Revision, err)
		}
	}
}

// A delete is read back too: the cluster holds no key at its revision. A cluster restored to
// a point after the newest put captured, gone on past the deletes that came after it, holds
// that put still; only the delete tells the histories apart (review of the session (7), F3).
func TestADeleteAfterTheLastPutIsReadBack(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx := t.Context()
	p0, err := cli.Put(ctx, "/registry/pods/p0", "captured")
	if err != nil {
		t.Fatal(err)
	}
	// The cluster as restored goes on with a config map where the capture received p0's
	// deletion.
	c0, err := cli.Put(ctx, "/registry/configmaps/c0", "the new history's")
	if err != nil {
		t.Fatal(err)
	}
	held := newContinuity(0, 0)
	if _, err := held.event(created("/registry/pods/p0", "captured", p0.Header.Revision)); err != nil {
		t.Fatal(err)
	}
	if _, err := held.event(del("/registry/pods/p0", c0.Header.Revision)); err != nil {
		t.Fatal(err)
	}
	err = held.checkRevision(ctx, cli, c0.Header.Revision)
	var at *wentBackAt
	if !errors.As(err, &at) || at.revision != c0.Header.Revision {
		t.Fatalf("the check: %v; want p0's deletion at revision %d no longer held", err, c0.Header.Revision)
	}
	// A deletion is read back as that very change, not as any absence: a key the cluster
	// never held (created, in the history captured, after the point it was restored to) is
	// not there just before the deletion's revision either.
	held = newContinuity(0, 0)
	if _, err := held.event(del("/registry/pods/p9", c0.Header.Revision)); err != nil {
		t.Fatal(err)
	}
	if err := held.checkRevision(ctx, cli, c0.Header.Revision); !errors.As(err, &at) || at.revision != c0.Header.Revision {
		t.Fatalf("the check: %v; want p9's deletion at revision %d no longer held", err, c0.Header.Revision)
	}
	// The history captured: p0 deleted, read back where it was, seen put first or not.
	gone, err := cli.Delete(ctx, "/registry/pods/p0")
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, c0.Header.Revision} {
		held = newContinuity(from, 0)
		if from == 0 {
			if _, err := held.event(created("/registry/pods/p0", "captured", p0.Header.Revision)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := held.event(del("/registry/pods/p0", gone.Header.Revision)); err != nil {
			t.Fatal(err)
		}
		if err := held.checkRevision(ctx, cli, gone.Header.Revision); err != nil || held.anchor == nil || !held.anchor.deleted {
			t.Fatalf("the check of the history captured (from revision %d): %v, anchor %+v", from, err, held.anchor)
		}
	}
}

// A revision sent again in a later watch response (an etcd watch bug, #17247) after a
// transaction put a key and deleted it there is a replay, not the key back at a version after
// its deletion (review of the change, F1). In one response, the same revision twice is two
// changes of one transaction.
func TestARevisionSentAgainAfterAPutAndADeleteIsAReplay(t *testing.T) {
	c := newContinuity(100, 0)
	c.watchResponse(nil)
	for _, ev := range []*clientv3.Event{put("a", 101, 50, 6), del("a", 101)} {
		if replay, err := c.event(ev); replay || err != nil {
			t.Fatalf("%s at 101: replay %v, %v", ev.Type, replay, err)
		}
	}
	c.watchResponse(nil)
	for _, ev := range []*clientv3.Event{put("a", 101, 50, 6), del("a", 101)} {
		if replay, err := c.event(ev); !replay || err != nil {
			t.Fatalf("%s at 101 sent again: replay %v, %v", ev.Type, replay, err)
		}
	}
}

// A watch response from another member, or at another raft term (the watch resumed after a
// cut, on a member that may have been restored meanwhile), makes the newest change received
// before it the unverified one: a check that answers at once, the connection back, would
// otherwise read only the anchor and the new history's changes.
func TestAWatchResumedElsewhereLeavesTheLastChangeUnverified(t *testing.T) {
	c := newContinuity(100, 0)
	c.watchResponse(&etcdserverpb.ResponseHeader{MemberId: 1, RaftTerm: 2})
	if _, err := c.event(put("a", 101, 101, 1)); err != nil {
		t.Fatal(err)
	}
	c.watchResponse(&etcdserverpb.ResponseHeader{MemberId: 1, RaftTerm: 2})
	if c.unverified != nil {
		t.Fatalf("the same member at the same term: %+v unverified", c.unverified)
	}
	c.watchResponse(&etcdserverpb.ResponseHeader{MemberId: 1, RaftTerm: 3})
	if c.unverified == nil || c.unverified.revision != 101 {
		t.Fatalf("a new term: unverified %+v, want the put at 101", c.unverified)
	}
	c.unverified = nil
	c.watchResponse(&etcdserverpb.ResponseHeader{MemberId: 7, RaftTerm: 3})
	if c.unverified == nil || c.unverified.revision != 101 {
		t.Fatalf("another member: unverified %+v, want the put at 101", c.unverified)
	}
}

// A check that gets no answer (the run's connection cut, the member stopped for a restore)
// leaves the newest change received before it unverified: every check reads it back until one
// answers. Changes of a restored cluster received first, once the connection is back, are
// held by that cluster: were they and the anchor (checked before the last changes of the
// history captured came) the only ones read back, the restore would pass.
func TestTheChangeReceivedBeforeACutIsReadBackAfterIt(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx := t.Context()
	var revs []int64
	for _, key := range []string{"/registry/pods/p0", "/registry/configmaps/c0", "/registry/configmaps/c1"} {
		resp, err := cli.Put(ctx, key, "v")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	held := newContinuity(0, 0)
	// Captured and checked: p0. Then received: p0 deleted, where the cluster as restored
	// holds c0.
	if _, err := held.event(created("/registry/pods/p0", "v", revs[0])); err != nil {
		t.Fatal(err)
	}
	if err := held.checkRevision(ctx, cli, revs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := held.event(del("/registry/pods/p0", revs[1])); err != nil {
		t.Fatal(err)
	}
	// The cut: a check with no answer.
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if err := held.checkRevision(cut, cli, revs[1]); err != nil {
		t.Fatalf("a check with no answer judged: %v", err)
	}
	// Back: the restored cluster's c1 comes first.
	if _, err := held.event(created("/registry/configmaps/c1", "v", revs[2])); err != nil {
		t.Fatal(err)
	}
	err := held.checkRevision(ctx, cli, revs[2])
	var at *wentBackAt
	if !errors.As(err, &at) || at.revision != revs[1] {
		t.Fatalf("the check after the cut: %v; want p0's deletion at revision %d no longer held", err, revs[1])
	}
}
