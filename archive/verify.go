package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/freeport"
	"github.com/etcdmedic/etcdmedic/store"
)

// Verification is what restoring a backup showed.
type Verification struct {
	ID string `json:"id"`
	// From is, for a point in time, the full backup it was replayed from; Replayed the revisions
	// of history applied after it.
	From     string    `json:"from,omitempty"`
	Replayed int64     `json:"replayed,omitempty"`
	At       time.Time `json:"at"`
	Result   string    `json:"result"` // verified or failed
	Why      string    `json:"why,omitempty"`
	Revision int64     `json:"revision"`
	HashKV   uint32    `json:"hashKV"` // the restored member's, at the backup's revision
	Seconds  float64   `json:"seconds"`
}

// VerifyOptions say how to restore.
type VerifyOptions struct {
	// Etcd is the server command the scratch member runs (binary and leading args).
	Etcd []string
	// Etcdutl restores the snapshot (of the cluster's version): binary and leading args.
	Etcdutl []string
	// Scratch is a folder for the restore (removed after).
	Scratch string
	// Credentials log in to a member restored from a backup taken with auth enabled.
	Credentials Credentials
}

// Verify restores the backup into a scratch one-member etcd on 127.0.0.1, asks it for its hash
// at the backup's revision, compares it with the hash the cluster gave when the backup was
// taken, and records the result in the store (verify/<id>.json), which backup ls shows. A
// failed verification is a result, not an error; an error is a verification that could not run.
func Verify(ctx context.Context, st *store.Store, f *Full, opts VerifyOptions) (*Verification, error) {
	start := time.Now()
	v := &Verification{ID: f.ID, Revision: f.Revision}
	dir, err := scratchFolder(opts.Scratch, "verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hash, why, err := restoreAndHash(ctx, st, f, opts, dir)
	if err != nil {
		return nil, err
	}
	v.HashKV = hash
	switch {
	case why != "":
		v.Result, v.Why = "failed", why
	case hash != f.HashKV:
		v.Result, v.Why = "failed", fmt.Sprintf("restored, its hash at revision %d is %d; the cluster's was %d", f.Revision, hash, f.HashKV)
	default:
		v.Result = "verified"
	}
	v.At, v.Seconds = time.Now().UTC(), time.Since(start).Seconds()
	if err := st.PutJSON(ctx, verifyPrefix+f.ID+".json", v); err != nil {
		return nil, err
	}
	return v, nil
}

// restoreAndHash returns the restored member's hash, or why the backup does not restore.
func restoreAndHash(ctx context.Context, st *store.Store, f *Full, opts VerifyOptions, dir string) (uint32, string, error) {
	snap := filepath.Join(dir, "snapshot.db")
	if err := Fetch(ctx, st, f, snap); errors.Is(err, ErrDamaged) {
		return 0, err.Error(), nil
	} else if err != nil {
		return 0, "", err
	}
	creds, err := opts.Credentials.forBackup(f)
	if err != nil {
		return 0, "", err
	}
	sm, err := startScratch(ctx, snap, dir, "verify", opts.Etcd, opts.Etcdutl, creds)
	var refused restoreFailed
	if errors.As(err, &refused) {
		return 0, refused.msg, nil
	}
	if err != nil {
		return 0, "", err
	}
	defer sm.stop()
	var resp *clientv3.HashKVResponse
	var refusedRev error
	err = sm.answer(ctx, fmt.Sprintf("hashkv at revision %d", f.Revision), func(c context.Context) error {
		r, err := sm.cli.HashKV(c, sm.endpoint, f.Revision)
		if isRevisionRefusal(err) {
			refusedRev = err
			return nil
		}
		resp = r
		return err
	})
	switch {
	case errors.Is(err, errRestoredMemberExited):
		if err := scratchRoom(dir, 0); err != nil {
			return 0, "", err // the machine's fault: nothing said about the backup
		}
		return 0, err.Error(), nil
	case err != nil:
		return 0, "", err
	case refusedRev != nil:
		return 0, fmt.Sprintf("the restored member does not hold revision %d, the revision its manifest records: %v", f.Revision, refusedRev), nil
	}
	return hashCompactedAsTheMember(ctx, sm, f, resp.Hash, resp.CompactRevision)
}

// isRevisionRefusal reports whether err is etcd refusing a revision it does not hold: in the
// future (the backup holds less than its manifest says) or compacted away.
func isRevisionRefusal(err error) bool {
	if err == nil {
		return false
	}
	typed := rpctypes.Error(err)
	return errors.Is(typed, rpctypes.ErrFutureRev) || errors.Is(typed, rpctypes.ErrCompacted) ||
		errors.Is(err, rpctypes.ErrFutureRev) || errors.Is(err, rpctypes.ErrCompacted)
}

func lastLine(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if i := bytes.LastIndexByte([]byte(s), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func freePorts(n int) ([]int, error) { return freeport.Ports(n) }

// etcdutlCommand runs etcdutl (binary and leading args: `etcdmedic etcdutl` for the linked one).
func etcdutlCommand(ctx context.Context, etcdutl []string, args ...string) *exec.Cmd {
	if len(etcdutl) == 0 {
		etcdutl = []string{"etcdutl"}
	}
	return exec.CommandContext(ctx, etcdutl[0], append(append([]string{}, etcdutl[1:]...), args...)...)
}

// hashCompactedAsTheMember returns the restored member's hash at f's revision, compacted first
// as far as the member was when it hashed (it may have compacted after the snapshot: etcd's
// corruption check, too, compares hashes only at one compaction revision).
func hashCompactedAsTheMember(ctx context.Context, sm *scratch, f *Full, hash uint32, compactRev int64) (uint32, string, error) {
	if f.HashCompactRevision <= compactRev {
		return hash, "", nil
	}
	if _, err := sm.cli.Compact(ctx, f.HashCompactRevision, clientv3.WithCompactPhysical()); err != nil {
		return 0, "", fmt.Errorf("compact the restored member to revision %d, as the member was when it hashed: %w", f.HashCompactRevision, err)
	}
	resp, err := sm.cli.HashKV(ctx, sm.endpoint, f.Revision)
	if err != nil {
		return 0, "", fmt.Errorf("the restored member's hash: %w", err)
	}
	return resp.Hash, "", nil
}
