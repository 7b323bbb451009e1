package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// liveCopyOptions say how to reach a running member to copy its db consistently.
type liveCopyOptions struct {
	endpoint           string
	cacert, cert, key  string
	insecureSkipVerify bool
	timeout            time.Duration
}

func (o liveCopyOptions) client() (*clientv3.Client, error) {
	conn := cluster.Conn{Endpoints: []string{o.endpoint}, CACert: o.cacert, Cert: o.cert, Key: o.key, InsecureSkipVerify: o.insecureSkipVerify, DialTimeout: 5 * time.Second, CommandTimeout: o.timeout}
	if err := conn.Validate(); err != nil {
		return nil, err
	}
	return conn.ClientFor(o.endpoint)
}

// inspectLiveCopy inspects a running member through a copy: its WAL and .snap files as they
// are, and its db taken through the snapshot API of the member itself. The copy lives in a
// temporary folder of etcdmedic's own and is removed afterwards; the data dir is only read.
func inspectLiveCopy(ctx context.Context, dataDir string, o liveCopyOptions, opts datadir.Options) (*datadir.Report, error) {
	tmp, err := os.MkdirTemp("", "etcdmedic-livecopy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	memberDir, err := datadir.CopyLogsForInspection(dataDir, opts.WALDir, tmp)
	if err != nil {
		return nil, err
	}
	cli, err := o.client()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	st, err := cli.Status(ctx, o.endpoint)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", o.endpoint, err)
	}
	if _, err := backup.SaveSnapshot(ctx, cli, filepath.Join(memberDir, "snap", "db")); err != nil {
		return nil, fmt.Errorf("%s: %w", o.endpoint, err)
	}
	walDir := opts.WALDir
	opts.WALDir = "" // the copy has its WAL in member/wal
	r, err := datadir.Inspect(tmp, opts)
	if err != nil {
		return nil, err
	}
	if r.Identity != nil && uint64(r.Identity.MemberID) != st.Header.MemberId {
		return nil, fmt.Errorf("%s is member %x, but %s belongs to member %s: give the endpoint of the member that runs on this data dir", o.endpoint, st.Header.MemberId, dataDir, r.Identity.MemberID)
	}
	r.Path = dataDir
	r.MemberDir, r.WALDir = "", walDir
	if r.Backend != nil {
		r.Backend.Path = o.endpoint + " (snapshot)"
	}
	r.LiveCopy = &datadir.LiveCopy{Endpoint: o.endpoint, Note: "WAL and .snap files copied while the member ran; db taken through its snapshot API"}
	return r, nil
}
