package kubeworkload

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What an object may be after each kind of outcome, the way the checker reads it back.
func TestAnObjectMayBeOnlyWhatWasAcknowledgedOrAttempted(t *testing.T) {
	v1, v2 := &State{Data: "c0-1", RV: "10"}, &State{Data: "c0-2"}
	for _, tc := range []struct {
		name string
		o    object
		seen *State
		want bool
	}{
		{"acknowledged, read back", object{Known: v1}, &State{Data: "c0-1", RV: "10"}, true},
		{"acknowledged update lost: an older value is back", object{Known: v2}, v1, false},
		{"acknowledged create lost", object{Known: v1}, nil, false},
		{"acknowledged delete undone", object{Known: nil}, v1, false},
		{"indeterminate update: the old value", object{Known: v1, Candidates: []*State{v1, v2}}, v1, true},
		{"indeterminate update: the new value", object{Known: v1, Candidates: []*State{v1, v2}}, &State{Data: "c0-2", RV: "12"}, true},
		{"indeterminate delete: gone", object{Known: v1, Candidates: []*State{v1, nil}}, nil, true},
		{"indeterminate update: a third value", object{Known: v1, Candidates: []*State{v1, v2}}, &State{Data: "c9-9"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.mayBe(tc.seen); got != tc.want {
				t.Errorf("mayBe(%s) = %v, want %v (expected %s)", tc.seen, got, tc.want, tc.o.expected())
			}
		})
	}
}

// An answer from the apiserver that it did not apply the operation is a refusal; anything else
// (a timeout, a lost connection, an etcd error behind a 500) may have been applied.
func TestRefusedOrMaybeApplied(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"conflict on a resourceVersion precondition", apierrors.NewConflict(gr, "x", errors.New("modified")), true},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), true},
		{"not found", apierrors.NewNotFound(gr, "x"), true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"etcd timed out behind the apiserver", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), false},
		{"apiserver timeout", apierrors.NewTimeoutError("timeout", 1), false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refused(tc.err); got != tc.want {
				t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// An informer's cache is compared with etcd name by name, resourceVersion by resourceVersion.
func TestInformerDifferences(t *testing.T) {
	etcd := map[string]string{"configmap/a": "10", "secret/b": "11"}
	for _, tc := range []struct {
		name  string
		cache map[string]string
		n     int
		first string
	}{
		{"equal", map[string]string{"configmap/a": "10", "secret/b": "11"}, 0, ""},
		{"a stale version", map[string]string{"configmap/a": "9", "secret/b": "11"}, 1, "configmap/a: etcd has resourceVersion 10, the cache resourceVersion 9"},
		{"missing and extra", map[string]string{"configmap/z": "3", "secret/b": "11"}, 2, "configmap/a: etcd has resourceVersion 10, the cache nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, first := differences(etcd, tc.cache)
			if n != tc.n || first != tc.first {
				t.Errorf("differences = %d %q, want %d %q", n, first, tc.n, tc.first)
			}
		})
	}
}
