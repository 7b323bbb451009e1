package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot is a member's db saved through the maintenance API.
type Snapshot struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SaveSnapshot streams the db of the member cli talks to (its first endpoint) into path, as
// etcdctl snapshot save does: written to path.partial (private to its owner: it holds every
// Secret of the cluster), synced, then renamed, so that path never names half a snapshot.
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
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
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
	return &Snapshot{Path: path, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
