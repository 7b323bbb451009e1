package archive_test

import (
	"context"
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
