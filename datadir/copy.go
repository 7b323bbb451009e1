package datadir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdmedic/etcdmedic/backup"
)

// CopyLogsForInspection copies what can be read safely from a running member into dst: its
// WAL segments and .snap files (etcd only appends to the one and writes the other once) and a
// PD join file. The db is not copied: a running member rewrites it in place, so a consistent
// copy must come from etcd itself (the snapshot API). The source is only read.
// walDir is the member's --wal-dir ("": member/wal); the copy always has it as member/wal.
func CopyLogsForInspection(dataDir, walDir, dst string) (memberDir string, err error) {
	r := &Report{Path: dataDir}
	if err := r.classify(dataDir, timeNow(), walDir); err != nil {
		return "", err
	}
	if r.Kind != KindEtcdMember && r.Kind != KindPDMember {
		return "", fmt.Errorf("%w: %s is not an etcd data dir: %s", ErrNotInspectable, dataDir, r.KindReason)
	}
	dstMember := filepath.Join(dst, "member")
	for _, sub := range []string{"wal", "snap"} {
		if err := os.MkdirAll(filepath.Join(dstMember, sub), 0o700); err != nil {
			return "", err
		}
		from := filepath.Join(r.MemberDir, sub)
		if sub == "wal" {
			from = r.WALDir
		}
		ents, err := os.ReadDir(from)
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			name := e.Name()
			if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".wal") || strings.HasSuffix(name, ".snap")) {
				continue
			}
			if err := backup.CopyFile(filepath.Join(from, name), filepath.Join(dstMember, sub, name), 0o600); err != nil {
				return "", err
			}
		}
	}
	if r.PDJoin != nil {
		if err := backup.CopyFile(r.PDJoin.Path, filepath.Join(dst, "join"), 0o600); err != nil {
			return "", err
		}
	}
	return dstMember, nil
}
