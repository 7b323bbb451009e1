package datadir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SealedWALSegments lists, relative to the data dir, the WAL segments etcd will never write
// again: every segment but the newest. etcd appends only to the last segment (a full one is
// closed and the next created from a preallocated .tmp file), repairs only the last one, and
// removes old ones whole when it purges. A copy of a sealed segment can therefore be a hard
// link to it. Nothing is listed when member/wal cannot be read.
func SealedWALSegments(dataDir string) map[string]bool {
	return sealedIn(filepath.Join(dataDir, "member", "wal"), filepath.Join("member", "wal"))
}

// SealedSegmentsIn is SealedWALSegments for a WAL dir apart (--wal-dir), relative to it.
func SealedSegmentsIn(walDir string) map[string]bool { return sealedIn(walDir, "") }

func sealedIn(dir, prefix string) map[string]bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var segs []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".wal") {
			segs = append(segs, e.Name())
		}
	}
	slices.Sort(segs) // the names are <seq>-<index>.wal in fixed-width hex
	sealed := map[string]bool{}
	for _, s := range segs[:max(0, len(segs)-1)] {
		sealed[filepath.Join(prefix, s)] = true
	}
	return sealed
}
