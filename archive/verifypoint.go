package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/store"
)

const pointVerifyPrefix = verifyPrefix + "points/"

func pointVerifyKey(rev int64) string { return fmt.Sprintf("%s%012d.json", pointVerifyPrefix, rev) }

// VerifyPoint proves that the store restores to a point in time, as Verify proves a full
// backup: it takes the newest point the store reaches (a full backup and the history after it),
// asks the live cluster (endpoint, through cli) for its hash at that revision, replays the point
// into a scratch member (the backup restored, the history applied), compacts the scratch member
// as far as the cluster is compacted, and compares the two hashes. The result is recorded in
// the store (verify/points/<revision>.json), which backup ls shows. A mismatch, or history that
// does not replay, is a failed result; an error is a verification that could not run (the
// cluster compacted past the point, the store or the scratch disk failing).
func VerifyPoint(ctx context.Context, st *store.Store, cli *clientv3.Client, endpoint string, opts VerifyOptions) (*Verification, error) {
	start := time.Now()
	p, err := Choose(ctx, st, 0, time.Time{})
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	live, err := cli.HashKV(hctx, endpoint, p.Revision)
	cancel()
	if errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return nil, fmt.Errorf("the cluster has compacted past revision %d, the newest point the store reaches: nothing to compare it with (is the capture behind?)", p.Revision)
	}
	if err != nil {
		return nil, fmt.Errorf("the cluster's hash at revision %d (%s): %w", p.Revision, endpoint, err)
	}
	v := &Verification{ID: fmt.Sprintf("point-r%d", p.Revision), From: p.Full.ID, Revision: p.Revision}
	dir, err := scratchFolder(opts.Scratch, "verify-point-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hash, why, err := replayAndHash(ctx, st, p, opts, dir, live.CompactRevision)
	if err != nil {
		return nil, err
	}
	v.HashKV, v.Replayed = hash, p.Revision-p.Full.Revision
	switch {
	case why != "":
		v.Result, v.Why = "failed", why
	case hash != live.Hash:
		v.Result, v.Why = "failed", fmt.Sprintf("replayed backup %s and its history, the hash at revision %d is %d; the cluster's is %d", p.Full.ID, p.Revision, hash, live.Hash)
	default:
		v.Result = "verified"
	}
	v.At, v.Seconds = time.Now().UTC(), time.Since(start).Seconds()
	if err := st.PutJSON(ctx, pointVerifyKey(p.Revision), v); err != nil {
		return nil, err
	}
	return v, nil
}

// replayAndHash restores p's full backup into a scratch member in dir, replays its history,
// compacts it to compactRev (the cluster's), and returns its hash at p's revision, or why the
// point does not replay.
func replayAndHash(ctx context.Context, st *store.Store, p *Point, opts VerifyOptions, dir string, compactRev int64) (uint32, string, error) {
	snap := filepath.Join(dir, "snapshot.db")
	if err := Fetch(ctx, st, &p.Full, snap); errors.Is(err, ErrDamaged) {
		return 0, err.Error(), nil
	} else if err != nil {
		return 0, "", err
	}
	events, err := pointEvents(ctx, st, p)
	if err != nil {
		return 0, "", err
	}
	creds, err := opts.Credentials.forBackup(&p.Full)
	if err != nil {
		return 0, "", err
	}
	sm, err := startScratch(ctx, snap, dir, "verify-point", opts.Etcd, opts.Etcdutl, creds, "--unsafe-no-fsync")
	var refused restoreFailed
	if errors.As(err, &refused) {
		return 0, refused.msg, nil
	}
	if err != nil {
		return 0, "", err
	}
	defer sm.stop()
	if err := waitServing(ctx, sm); errors.Is(err, errRestoredMemberExited) {
		if roomErr := scratchRoom(dir, 0); roomErr != nil {
			return 0, "", roomErr
		}
		return 0, err.Error(), nil
	} else if err != nil {
		return 0, "", err // not answering in time, or asked to stop: nothing said about the backup
	}
	lctx, cancel := context.WithCancel(ctx) // leases live until the hash is taken
	defer cancel()
	if err := replayOnto(lctx, sm.cli, events); err != nil {
		if roomErr := scratchRoom(dir, 0); roomErr != nil {
			return 0, "", roomErr
		}
		return 0, err.Error(), nil
	}
	resp, err := sm.cli.HashKV(ctx, sm.endpoint, p.Revision)
	if err != nil {
		return 0, "", fmt.Errorf("the scratch member's hash: %w", err)
	}
	if resp.CompactRevision < compactRev {
		if _, err := sm.cli.Compact(ctx, compactRev, clientv3.WithCompactPhysical()); err != nil {
			return 0, "", fmt.Errorf("compact the scratch member to revision %d, as the cluster is: %w", compactRev, err)
		}
		if resp, err = sm.cli.HashKV(ctx, sm.endpoint, p.Revision); err != nil {
			return 0, "", fmt.Errorf("the scratch member's hash: %w", err)
		}
	}
	return resp.Hash, "", nil
}

// PointChecks lists the revisions whose point-in-time verification the store holds, in order.
func PointChecks(ctx context.Context, st *store.Store) ([]int64, error) {
	keys, err := st.List(ctx, pointVerifyPrefix)
	if err != nil {
		return nil, err
	}
	var revs []int64
	for _, k := range keys {
		var rev int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(k, pointVerifyPrefix), "%d.json", &rev); err == nil && pointVerifyKey(rev) == k {
			revs = append(revs, rev)
		}
	}
	slices.Sort(revs)
	return revs, nil
}

// LatestPointCheck is the verification of the newest point verified (nil: none yet).
func LatestPointCheck(ctx context.Context, st *store.Store) (*Verification, error) {
	revs, err := PointChecks(ctx, st)
	if err != nil || len(revs) == 0 {
		return nil, err
	}
	var v Verification
	if err := st.GetJSON(ctx, pointVerifyKey(revs[len(revs)-1]), &v); err != nil {
		return nil, err
	}
	return &v, nil
}
