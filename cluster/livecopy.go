package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// InspectRunning inspects a running member, whose files etcd locks, through a copy: its WAL
// and .snap files as they are (etcd only appends to them), and its db taken through the
// snapshot API of the member itself at endpoint. The copy lives in a temporary folder of
// etcdmedic's own and is removed afterwards; the data dir is only read.
func InspectRunning(ctx context.Context, conn Conn, endpoint, dataDir string, opts datadir.Options) (*datadir.Report, error) {
	tmp, err := os.MkdirTemp("", "etcdmedic-livecopy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	memberDir, err := datadir.CopyLogsForInspection(dataDir, opts.WALDir, tmp)
	if err != nil {
		return nil, err
	}
	if err := conn.Validate(); err != nil {
		return nil, err
	}
	cli, err := conn.ClientFor(endpoint)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, conn.CommandTimeout)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", endpoint, err)
	}
	if _, err := backup.SaveSnapshot(ctx, cli, filepath.Join(memberDir, "snap", "db")); err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	walDir := opts.WALDir
	opts.WALDir = "" // the copy has its WAL in member/wal
	r, err := datadir.Inspect(tmp, opts)
	if err != nil {
		return nil, err
	}
	if r.Identity != nil && uint64(r.Identity.MemberID) != st.Header.MemberId {
		return nil, fmt.Errorf("%s is member %x, but %s belongs to member %s: give the endpoint of the member that runs on this data dir", endpoint, st.Header.MemberId, dataDir, r.Identity.MemberID)
	}
	r.Path = dataDir
	r.MemberDir, r.WALDir = "", walDir
	if r.Backend != nil {
		r.Backend.Path = endpoint + " (snapshot)"
	}
	r.LiveCopy = &datadir.LiveCopy{Endpoint: endpoint, Note: "WAL and .snap files copied while the member ran; db taken through its snapshot API"}
	return r, nil
}
