package archive_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/archive"
)

// restore --to-time T starts from a full backup taken at or before T. The backup's time was
// read before its snapshot began, so the snapshot could hold a change made after that time (the
// member fixes the snapshot's revision when its stream starts): a restore to a time before
// that change restored it anyway. The time is read once the snapshot is whole; here a change
// is made at the very moment the time is read, and the backup never holds it.
func TestAFullBackupHoldsNothingMadeAfterItsTime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, st, _, conn := aMemberAndAStore(t, ctx)
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/registry/pods/before", "v"); err != nil {
		t.Fatal(err)
	}
	var madeAt int64 // the revision of the change made when the backup's time is read
	now := func() time.Time {
		at := time.Now()
		resp, err := cli.Put(ctx, "/registry/pods/at-the-backup-time", "v")
		if err != nil {
			t.Error(err)
			return at
		}
		madeAt = resp.Header.Revision
		return at
	}
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if madeAt == 0 || f.Revision >= madeAt {
		t.Fatalf("backup %s (taken at %s) holds revision %d, the change made at that time is revision %d: a restore to its time holds a change made after it", f.ID, f.Taken.Format(time.RFC3339Nano), f.Revision, madeAt)
	}
}

// A full backup from a member that lags (its snapshot below what the run has captured, while
// the cluster is past it) is a point of the same history: it continues the generation. It
// started a new one, as if the cluster had gone back, and the next capture began a generation
// whose history the old one's restores could not use. A snapshot below what was captured
// while the cluster too is below it is another history (TestBackupRunNoticesTheClusterRestored-
// UnderneathIt): a new generation.
func TestAFullBackupFromALaggingMemberContinuesItsGeneration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, st, _, conn := aMemberAndAStore(t, ctx)
	cli := c.Client(t)
	resp, err := cli.Put(ctx, "/registry/pods/p0", "v")
	if err != nil {
		t.Fatal(err)
	}
	snapshotAt := resp.Header.Revision
	first, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The run has captured 5 revisions past what the next snapshot holds, and the cluster goes
	// 10 past it (the writes land once the snapshot is whole, as a lagging member's would be
	// behind).
	now := func() time.Time {
		for i := range 10 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/p%d", i+1), "v"); err != nil {
				t.Error(err)
			}
		}
		return time.Now()
	}
	next, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir(), Now: now,
		Generation: first.Generation, Captured: snapshotAt + 5, ClusterID: first.ClusterID})
	if err != nil {
		t.Fatal(err)
	}
	if next.Revision >= snapshotAt+5 {
		t.Fatalf("the snapshot holds revision %d: the test needs it below %d", next.Revision, snapshotAt+5)
	}
	if next.Generation != first.Generation {
		t.Fatalf("a snapshot at revision %d, below the %d captured while the cluster is past it, started generation %s; want %s continued", next.Revision, snapshotAt+5, next.Generation, first.Generation)
	}
}
