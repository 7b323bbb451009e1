// Package archive is the backups etcdmedic keeps in an object store (package store): full
// snapshots taken through the maintenance API, each a data object and a manifest written after
// it (the manifest is what lists a backup), and each verified by restoring it into a scratch
// member and comparing its hash with the cluster's at the same revision.
package archive

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/store"
)

const (
	fullPrefix   = "full/"
	verifyPrefix = "verify/"
)

// Full is a full backup's manifest.
type Full struct {
	ID    string    `json:"id"` // sortable: <taken, UTC>-r<revision>
	Taken time.Time `json:"taken"`
	// Revision is the snapshot's revision and HashKV the member's hash of the key space at it,
	// asked right after the snapshot: a restore of this backup must hash the same.
	Revision        int64  `json:"revision"`
	CompactRevision int64  `json:"compactRevision"`
	HashKV          uint32 `json:"hashKV"`
	// HashCompactRevision is the member's compaction revision when it hashed: etcd's hash
	// depends on it, and the member may compact between the snapshot and the hash.
	HashCompactRevision int64               `json:"hashCompactRevision,omitempty"`
	ClusterID           etcdmedic.ClusterID `json:"clusterID"`
	// AuthEnabled: the snapshot's auth is on, so a member restored from it needs a user.
	AuthEnabled bool          `json:"authEnabled,omitempty"`
	Endpoint    string        `json:"endpoint"` // the member it was taken from
	EtcdVersion string        `json:"etcdVersion"`
	Data        store.Written `json:"data"`
	// Generation is the stretch of history the backup belongs to (see Generation): a restore
	// replays onto it only the history of that generation. Empty in backups taken before
	// generations.
	Generation Generation `json:"generation,omitempty"`
}

// DataKey is where its snapshot is.
func (f *Full) DataKey() string { return fullPrefix + f.ID + ".db" }

func manifestKey(id string) string { return fullPrefix + id + ".json" }

// backupIDTime is the layout of the time a full backup's ID starts with.
const backupIDTime = "20060102T150405.000Z"

// backupID names a full backup taken at taken, at revision rev: sorted by name, backups sort by
// time.
func backupID(taken time.Time, rev int64) string {
	return fmt.Sprintf("%s-r%012d", taken.UTC().Format(backupIDTime), rev)
}

// TakeOptions for TakeFull.
type TakeOptions struct {
	// Scratch is a folder for the snapshot on its way (it is removed after).
	Scratch string
	Now     func() time.Time
	// Generation is the generation the backup continues ("": a new one); Captured how far
	// that generation's history is stored, and ClusterID its cluster (0: not known). A
	// snapshot below Captured, or of another cluster, is another history (the cluster restored
	// to an earlier point, or endpoints that now reach another cluster): it starts a new
	// generation.
	Generation Generation
	Captured   int64
	ClusterID  etcdmedic.ClusterID
}

// TakeFull streams a snapshot from the member at conn's first endpoint, checks it (etcd's
// sha256 trailer, a readable bbolt db), asks the member for its hash at the snapshot's
// revision, and stores the snapshot, then its manifest.
func TakeFull(ctx context.Context, conn cluster.Conn, st *store.Store, opts TakeOptions) (*Full, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	if len(conn.Endpoints) == 0 {
		return nil, fmt.Errorf("no endpoint to take a backup from")
	}
	endpoint := conn.Endpoints[0]
	if err := conn.Reach(ctx, endpoint); err != nil {
		return nil, err
	}
	// The snapshot and the hash from the same member.
	one, err := conn.ClientFor(endpoint)
	if err != nil {
		return nil, err
	}
	defer one.Close()
	// Status first, within the command timeout: an endpoint that cannot be reached (down, a
	// wrong CA or certificate) fails here with gRPC's reason, rather than a snapshot that waits
	// for a connection forever.
	sctx, cancel := context.WithTimeout(ctx, cmp.Or(conn.CommandTimeout, 5*time.Second))
	status, err := one.Status(sctx, endpoint)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	if err := os.MkdirAll(opts.Scratch, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(opts.Scratch, "snapshot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	snap, err := backup.SaveSnapshot(ctx, one, filepath.Join(tmp, "snapshot.db"))
	if err != nil {
		return nil, err
	}
	// Taken once the snapshot is whole: every change it holds was made before then, so a
	// restore to a time at or after Taken (restore --to-time) holds nothing made after that
	// time. Read before the snapshot, the member could fix its revision later, past changes
	// made after Taken.
	taken := now().UTC()
	if !snap.TrailerOK {
		return nil, fmt.Errorf("the snapshot from %s does not end with a matching sha256 trailer (%d bytes): cut short or damaged in transfer", endpoint, snap.Size)
	}
	rep, err := datadir.Inspect(snap.Path, datadir.Options{})
	if err != nil || rep.Backend == nil {
		return nil, fmt.Errorf("the snapshot from %s is not a readable db: %v", endpoint, err)
	}
	// A db with no key yet reads as revision 0; etcd's first revision is 1 (and HashKV at 0
	// would hash whatever the member holds by then).
	rev := max(rep.Backend.Revision, 1)
	// The member hashes its key space while the snapshot uploads (both take seconds at 1 GiB).
	type hashed struct {
		hash       uint32
		compactRev int64
		err        error
	}
	hashDone := make(chan hashed, 1)
	go func() {
		resp, err := one.HashKV(ctx, endpoint, rev)
		if err != nil {
			hashDone <- hashed{err: fmt.Errorf("hashkv of %s at revision %d: %w", endpoint, rev, err)}
			return
		}
		hashDone <- hashed{hash: resp.Hash, compactRev: resp.CompactRevision}
	}()
	f := &Full{
		ID:    backupID(taken, rev),
		Taken: taken, Revision: rev, CompactRevision: rep.Backend.CompactedRevision, AuthEnabled: rep.Backend.AuthEnabled,
		ClusterID: etcdmedic.ClusterID(status.Header.ClusterId), Endpoint: endpoint, EtcdVersion: status.Version,
		Generation: opts.Generation,
	}
	if f.Generation == "" || rev < opts.Captured || (opts.ClusterID != 0 && f.ClusterID != opts.ClusterID) {
		f.Generation = NewGeneration()
	}
	in, err := os.Open(snap.Path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	w, err := st.Put(ctx, f.DataKey(), in)
	hk := <-hashDone
	if err != nil {
		return nil, err
	}
	if hk.err != nil {
		return nil, hk.err
	}
	// What was uploaded was read back from disk: the same bytes as received, or it stops here.
	if w.SHA256 != snap.SHA256 {
		return nil, fmt.Errorf("the snapshot read back from %s for upload has sha256 %s, received as %s", snap.Path, w.SHA256, snap.SHA256)
	}
	f.Data, f.HashKV, f.HashCompactRevision = *w, hk.hash, hk.compactRev
	if err := st.PutJSON(ctx, manifestKey(f.ID), f); err != nil {
		return nil, err
	}
	return f, nil
}

// Entry is a listed backup: its manifest and what verification said.
type Entry struct {
	Full
	Verification *Verification `json:"verification,omitempty"`
	// Unreadable says why the manifest could not be read (damaged, or encrypted to a key not
	// given): the backup is listed by its ID alone, never restored from, never pruned.
	Unreadable string `json:"unreadable,omitempty"`
}

// State is "verified", "failed", "unverified" or "unreadable".
func (e Entry) State() string {
	switch {
	case e.Unreadable != "":
		return "unreadable"
	case e.Verification == nil:
		return "unverified"
	}
	return e.Verification.Result
}

// Usable says whether a restore may start from the backup: its manifest reads and its
// verification, if any, did not fail.
func (e Entry) Usable() bool {
	state := e.State()
	return state != "failed" && state != "unreadable"
}

// List returns every full backup whose manifest is in the store, oldest first. Data without a
// manifest (an upload cut short) is not a backup and is not listed.
func List(ctx context.Context, st *store.Store) ([]Entry, error) {
	keys, err := st.List(ctx, fullPrefix)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		var e Entry
		id := strings.TrimSuffix(strings.TrimPrefix(k, fullPrefix), ".json")
		if err := st.GetJSON(ctx, k, &e.Full); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// One damaged manifest must not hide the others from ls, restore and prune.
			out = append(out, Entry{Full: Full{ID: id}, Unreadable: err.Error()})
			continue
		}
		if e.ID != id {
			// A manifest copied or renamed, or another tool's file: read by its ID, prune would
			// delete the objects of the backup it names, not its own. Kept, and shown.
			out = append(out, Entry{Full: Full{ID: id}, Unreadable: fmt.Sprintf("it names backup %q, not %q (a copy, or another tool's file)", e.ID, id)})
			continue
		}
		var v Verification
		switch err := st.GetJSON(ctx, verifyPrefix+e.ID+".json", &v); {
		case err == nil:
			e.Verification = &v
		case ctx.Err() != nil:
			return nil, err
		case !errors.Is(err, store.ErrNotFound):
			// A verification record that does not read leaves the backup unverified: restore
			// checks its bytes against its manifest anyway.
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Find returns the backup id among entries ("latest": the newest).
func Find(entries []Entry, id string) (Entry, error) {
	if len(entries) == 0 {
		return Entry{}, errors.New("the store holds no backup")
	}
	if id == "" || id == "latest" {
		return entries[len(entries)-1], nil
	}
	for _, e := range entries {
		if e.ID == id {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("no backup %q in the store (etcdmedic backup ls lists them)", id)
}

// LatestUsable returns the newest backup a restore may start from (Usable).
func LatestUsable(entries []Entry) (Entry, error) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Usable() {
			return entries[i], nil
		}
	}
	if len(entries) == 0 {
		return Entry{}, errors.New("the store holds no backup")
	}
	return Entry{}, errors.New("every backup in the store failed its verification or has an unreadable manifest")
}

// ErrDamaged is a backup whose own bytes are wrong (they do not decompress, or differ from its
// manifest, or do not read as a snapshot): a failed verification, unlike a store that does not
// answer or a local disk that is full.
var ErrDamaged = errors.New("damaged")

// Fetch downloads a backup's snapshot into path and checks it against its manifest (sha256,
// size) and etcd's trailer. A damaged backup's error is ErrDamaged.
func Fetch(ctx context.Context, st *store.Store, f *Full, path string) error {
	r, err := st.Get(ctx, f.DataKey())
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := os.OpenFile(path+".partial", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, store.ErrCorrupt) {
		os.Remove(path + ".partial")
		return fmt.Errorf("backup %s is %w: %v", f.ID, ErrDamaged, err)
	}
	if err != nil {
		os.Remove(path + ".partial")
		return fmt.Errorf("download %s: %w", f.DataKey(), err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.Data.SHA256 || n != f.Data.Bytes {
		os.Remove(path + ".partial")
		return fmt.Errorf("backup %s is %w: %d bytes with sha256 %s, its manifest says %d bytes, %s", f.ID, ErrDamaged, n, sum, f.Data.Bytes, f.Data.SHA256)
	}
	if err := backup.VerifySnapshot(path+".partial", ""); err != nil {
		os.Remove(path + ".partial")
		return fmt.Errorf("backup %s is %w: %v", f.ID, ErrDamaged, err)
	}
	return os.Rename(path+".partial", path)
}
