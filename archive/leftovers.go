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
//
// A full backup's data without its manifest is one too, in any store: TakeFull stores the data,
// then the manifest, so a run killed between the two (or a prune stopped between deleting a
// manifest and its data) leaves a whole snapshot that no listing shows and no restore uses. It is
// listed once the time its ID names is UploadLeftoverAge old.
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
		if prefix == fullPrefix {
			out = append(out, dataWithoutManifest(keys, now)...)
		}
	}
	return out, nil
}

// dataWithoutManifest lists, among the keys under full/, the data of backups whose manifest is
// not there, taken (by their ID) UploadLeftoverAge ago or more.
func dataWithoutManifest(keys []string, now time.Time) []string {
	manifests := map[string]bool{}
	for _, k := range keys {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(k, fullPrefix), ".json"); ok {
			manifests[id] = true
		}
	}
	var out []string
	for _, k := range keys {
		id, ok := strings.CutSuffix(strings.TrimPrefix(k, fullPrefix), ".db")
		if !ok || manifests[id] {
			continue
		}
		if taken, ok := backupTaken(id); ok && now.Sub(taken) > UploadLeftoverAge {
			out = append(out, k)
		}
	}
	return out
}

// backupTaken reads the time out of a full backup's ID (TakeFull's "<time>-r<revision>"), only
// from an ID spelled exactly as TakeFull spells it.
func backupTaken(id string) (time.Time, bool) {
	at, rev, ok := strings.Cut(id, "-r")
	if !ok {
		return time.Time{}, false
	}
	taken, err := time.Parse(backupIDTime, at)
	n, nerr := strconv.ParseInt(rev, 10, 64)
	if err != nil || nerr != nil || backupID(taken, n) != id {
		return time.Time{}, false
	}
	return taken, true
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
