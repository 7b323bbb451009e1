package drill

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/ledger"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// survivorDisk is what a member's disk holds after a power cut, read offline before any
// repair: where its log ends, what the runbook's --force-new-cluster would keep of it, and
// which keys its entries put.
type survivorDisk struct {
	Commit, ConsistentIndex, LastIndex uint64
	DBRevision                         int64
	// Tail is how its WAL ended ("" when cleanly): a torn record is what a cut leaves.
	Tail string
	// puts maps each key an entry of its WAL puts to that entry's index.
	puts map[string]uint64
}

// RunbookKeeps is the last index --force-new-cluster keeps: max(HardState.commit, consistent
// index) (etcd v3.6 server/etcdserver/bootstrap.go); every entry after it is discarded.
func (d *survivorDisk) RunbookKeeps() uint64 { return max(d.Commit, d.ConsistentIndex) }

// Holds reports whether the disk holds an acknowledged write: applied to its db (revisions
// are applied in order) or put by an entry of its WAL.
func (d *survivorDisk) Holds(w ledger.Write) bool {
	_, inLog := d.puts[w.Key]
	return w.Revision <= d.DBRevision || inLog
}

// RunbookDrops reports whether the runbook would lose an acknowledged write the disk holds:
// only in entries past what --force-new-cluster keeps.
func (d *survivorDisk) RunbookDrops(w ledger.Write) bool {
	idx, inLog := d.puts[w.Key]
	return w.Revision > d.DBRevision && inLog && idx > d.RunbookKeeps()
}

// readSurvivorDisk reads a stopped member's data dir without writing to it: inspect for the
// indexes and the db, and etcd's own wal package, on a copy of the WAL (repaired there when
// its last record is torn), for the entries.
func readSurvivorDisk(dataDir, scratch string) (*survivorDisk, error) {
	r, err := datadir.Inspect(dataDir, datadir.Options{})
	if err != nil || r.Raft == nil || r.Backend == nil {
		return nil, fmt.Errorf("inspect %s: %v (%s)", dataDir, err, backendError(r))
	}
	d := &survivorDisk{Commit: r.Raft.HardState.Commit, ConsistentIndex: r.Backend.ConsistentIndex, LastIndex: r.Raft.LastIndex,
		DBRevision: r.Backend.Revision, puts: map[string]uint64{}}
	if t := r.Raft.Tail; t != nil {
		d.Tail = t.Kind
	}
	walCopy := filepath.Join(scratch, "wal")
	if err := os.RemoveAll(walCopy); err != nil {
		return nil, err
	}
	if _, _, err := backup.CopyTreeSummed(filepath.Join(dataDir, "member", "wal"), walCopy, nil, 1); err != nil {
		return nil, err
	}
	defer os.RemoveAll(walCopy)
	lg := zap.NewNop()
	for repaired := false; ; repaired = true {
		w, err := wal.OpenForRead(lg, walCopy, &walpb.Snapshot{})
		if err != nil {
			return nil, err
		}
		_, _, ents, err := w.ReadAll()
		w.Close()
		if errors.Is(err, io.ErrUnexpectedEOF) && !repaired && wal.Repair(lg, walCopy) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the WAL of %s: %w", dataDir, err)
		}
		for _, e := range ents {
			var req etcdserverpb.InternalRaftRequest
			if e.GetType() != 0 || proto.Unmarshal(e.GetData(), &req) != nil || req.GetPut() == nil {
				continue
			}
			d.puts[string(req.GetPut().GetKey())] = e.GetIndex()
		}
		return d, nil
	}
}

func backendError(r *datadir.Report) string {
	if r == nil {
		return ""
	}
	return r.BackendError
}
