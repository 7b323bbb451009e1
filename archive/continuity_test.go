package archive

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

func put(key string, rev, created, version int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev, CreateRevision: created, Version: version}}
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
// outage): the next capture first asks the cluster, at the revision of the newest put
// received, for that key. The same change there: the history goes on. Another change there (a
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
	for _, tc := range []struct {
		name   string
		last   Event
		wentOn bool
	}{
		{"the change captured is there", Event{Revision: rev, Key: []byte("/registry/pods/p0"), Value: []byte("captured")}, true},
		{"another change at its revision", Event{Revision: rev, Key: []byte("/registry/pods/p0"), Value: []byte("the old history's")}, false},
		{"another key's change at its revision", Event{Revision: rev, Key: []byte("/registry/pods/p9"), Value: []byte("captured")}, false},
		{"a revision the cluster has not reached", Event{Revision: rev + 1000, Key: []byte("/registry/pods/p0"), Value: []byte("captured")}, false},
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
	if err := stillHolds(t.Context(), cli, Event{Revision: rev, Key: []byte("/registry/pods/p0"), Value: []byte("the old history's")}); err != nil {
		t.Fatalf("a compacted revision tells nothing, but: %v", err)
	}
}
