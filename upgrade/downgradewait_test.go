package upgrade

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// Review finding 9: the wait for a downgrade's storage version ignored SIGINT and SIGTERM and
// went on for the whole --step-timeout, then blamed the storage version. It stops with the
// cancellation at once.
func TestDowngradeWaitStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	asked := 0
	observe := func(context.Context) *cluster.View {
		asked++
		if asked == 2 {
			cancel() // the signal arrives while the wait goes on
		}
		return &cluster.View{} // no member answers yet
	}
	began := time.Now()
	err := waitStorageAt(ctx, "3.5", time.Minute, observe)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the cancellation", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("took %s to stop", took)
	}
}
