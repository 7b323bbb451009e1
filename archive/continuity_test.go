package archive

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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
		{"two keys in one transaction", []*clientv3.Event{put("a", 101, 101, 1), put("b", 101, 101, 1), put("a", 102, 101, 2)}, true},
		{"restored: a key's next version skips one", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 50, 6)}, false},
		{"restored: a key's version goes back", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 50, 3)}, false},
		{"restored: a key created again elsewhere", []*clientv3.Event{put("a", 101, 50, 4), put("a", 110, 105, 2)}, false},
		{"restored: a deleted key back at version 3", []*clientv3.Event{del("a", 101), put("a", 110, 60, 3)}, false},
		{"restored: a deleted key deleted again", []*clientv3.Event{del("a", 101), del("a", 110)}, false},
		{"restored: a key created after the capture began, its creation never received", []*clientv3.Event{put("b", 110, 105, 2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newContinuity(100)
			var err error
			for _, ev := range tc.events {
				if err = c.event(ev); err != nil {
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
	c := newContinuity(100)
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
