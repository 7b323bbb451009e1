package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot is a member's db saved through the maintenance API.
type Snapshot struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// TrailerOK: the stream ended with etcd's sha256 of the db before it, and it matched (the
	// check etcdutl snapshot restore makes), computed as the stream was written.
	TrailerOK bool `json:"trailerOK"`
}

// SaveSnapshot streams the db of the member cli talks to (its first endpoint) into path, as
// etcdctl snapshot save does: written to path.partial (private to its owner: it holds every
// Secret of the cluster), synced, then renamed, so that path never names half a snapshot, and
// its folder synced: the snapshot is durable when SaveSnapshot returns.
func SaveSnapshot(ctx context.Context, cli *clientv3.Client, path string) (*Snapshot, error) {
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer rc.Close()
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	h, body := sha256.New(), &trailerHash{h: sha256.New()}
	n, err := io.Copy(io.MultiWriter(f, h, body), rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// The rename is durable too: a step recorded done after the snapshot (upgrade apply's, a
	// member removed after it) must find it after a power cut.
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	ok := n%512 == sha256.Size && bytes.Equal(body.h.Sum(nil), body.last)
	return &Snapshot{Path: path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), TrailerOK: ok}, nil
}

// trailerHash hashes every byte written but the last sha256.Size, which it keeps.
type trailerHash struct {
	h    hash.Hash
	last []byte
}

func (t *trailerHash) Write(p []byte) (int, error) {
	if len(p) >= sha256.Size { // the usual case: no copy but the 32 bytes kept
		t.h.Write(t.last)
		t.h.Write(p[:len(p)-sha256.Size])
		t.last = append(t.last[:0], p[len(p)-sha256.Size:]...)
		return len(p), nil
	}
	all := append(append([]byte(nil), t.last...), p...)
	cut := max(0, len(all)-sha256.Size)
	t.h.Write(all[:cut])
	t.last = all[cut:]
	return len(p), nil
}

// VerifySnapshot reads a saved snapshot back: its sha256 must be want (the one computed while
// writing; "" skips that check), and the sha256 etcd appends to the stream (the last 32 bytes, when the size is a
// multiple of 512 plus 32, as etcdutl snapshot restore checks) must match the db before it.
func VerifySnapshot(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	whole, body := sha256.New(), sha256.New()
	size := st.Size()
	hasTrailer := size%512 == sha256.Size
	bodyLen := size
	if hasTrailer {
		bodyLen = size - sha256.Size
	}
	if _, err := io.CopyN(io.MultiWriter(whole, body), f, bodyLen); err != nil {
		return fmt.Errorf("read back %s: %w", path, err)
	}
	trailer := make([]byte, size-bodyLen)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return fmt.Errorf("read back %s: %w", path, err)
	}
	whole.Write(trailer)
	if got := hex.EncodeToString(whole.Sum(nil)); want != "" && got != want {
		return fmt.Errorf("snapshot %s reads back with sha256 %s, written as %s", path, got, want)
	}
	if hasTrailer && !bytes.Equal(body.Sum(nil), trailer) {
		return fmt.Errorf("snapshot %s: the db does not match the sha256 etcd appended to it (damaged in transfer)", path)
	}
	return nil
}
