package datadir

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CopyLogsForInspection copies what can be read safely from a running member into dst: its
// WAL segments and .snap files (etcd only appends to the one and writes the other once) and a
// PD join file. The db is not copied: a running member rewrites it in place, so a consistent
// copy must come from etcd itself (the snapshot API). The source is only read.
func CopyLogsForInspection(dataDir, dst string) (memberDir string, err error) {
	r := &Report{Path: dataDir}
	if err := r.classify(dataDir, timeNow()); err != nil {
		return "", err
	}
	if r.MemberDir == "" {
		return "", fmt.Errorf("%w: %s is not an etcd data dir: %s", ErrNotInspectable, dataDir, r.KindReason)
	}
	dstMember := filepath.Join(dst, "member")
	for _, sub := range []string{"wal", "snap"} {
		if err := os.MkdirAll(filepath.Join(dstMember, sub), 0o700); err != nil {
			return "", err
		}
		ents, err := os.ReadDir(filepath.Join(r.MemberDir, sub))
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			name := e.Name()
			if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".wal") || strings.HasSuffix(name, ".snap")) {
				continue
			}
			if err := copyFile(filepath.Join(r.MemberDir, sub, name), filepath.Join(dstMember, sub, name)); err != nil {
				return "", err
			}
		}
	}
	if r.PDJoin != nil {
		if err := copyFile(r.PDJoin.Path, filepath.Join(dst, "join")); err != nil {
			return "", err
		}
	}
	return dstMember, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
