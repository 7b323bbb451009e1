package archive

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// UploadLeftoverAge is how old an unfinished upload's temporary file must be before prune removes
// it: no upload of a backup or a segment takes a day.
const UploadLeftoverAge = 24 * time.Hour

// UploadLeftovers lists the temporary files of uploads killed mid-way (SIGKILL, a power loss)
// in a file:// store older than UploadLeftoverAge: gocloud's fileblob writes an object to
// "<key>.<its creation time, hex nanoseconds>.tmp" beside it and renames it once whole, so a
// killed upload leaves that file (as large as what it had written) and it is never a backup,
// a segment, nor listed as one. Other stores discard an unfinished upload themselves.
//
// Only the folders etcdmedic writes are looked in: a store's folder may hold files of others,
// whose names prune must not guess at.
func UploadLeftovers(ctx context.Context, st *store.Store, now time.Time) ([]string, error) {
	var out []string
	for _, prefix := range []string{fullPrefix, verifyPrefix, historyPrefix} {
		keys, err := st.List(ctx, prefix)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if created, ok := uploadLeftoverCreated(k); ok && now.Sub(created) > UploadLeftoverAge {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// uploadLeftoverCreated reads the creation time out of a temporary upload's name.
func uploadLeftoverCreated(key string) (time.Time, bool) {
	rest, ok := strings.CutSuffix(key, ".tmp")
	if !ok {
		return time.Time{}, false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot <= 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(rest[dot+1:], 16, 64)
	if err != nil || ns <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
