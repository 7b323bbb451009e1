package datadir

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/etcdmedic/etcdmedic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Backend is what the member's bbolt db (member/snap/db) says.
type Backend struct {
	Path              string             `json:"path"`
	FileBytes         int64              `json:"fileBytes"`
	SizeBytes         int64              `json:"sizeBytes"` // etcd's "DB SIZE": allocated pages x page size
	PageSize          uint32             `json:"pageSize"`
	ConsistentIndex   uint64             `json:"consistentIndex"`
	Term              uint64             `json:"term"`
	Revision          int64              `json:"revision"`
	CompactedRevision int64              `json:"compactedRevision"`
	ClusterVersion    string             `json:"clusterVersion,omitempty"`
	StorageVersion    string             `json:"storageVersion,omitempty"`
	Downgrade         string             `json:"downgrade,omitempty"`
	ConfState         *ConfState         `json:"confState,omitempty"`
	Alarms            []Alarm            `json:"alarms"`
	AuthEnabled       bool               `json:"authEnabled"`
	Members           []etcdmedic.Member `json:"-"`
	RemovedMembers    []etcdmedic.ID     `json:"-"`
	// Filled by a deep check only (it reads every page).
	Deep *DeepCheck `json:"deep,omitempty"`
}

// Alarm is an alarm raised on a member (NOSPACE, CORRUPT), as stored in the alarm bucket.
type Alarm struct {
	MemberID etcdmedic.ID `json:"memberID"`
	Alarm    string       `json:"alarm"`
}

// DeepCheck is what reading the whole db file found (CheckPages).
type DeepCheck struct {
	SizeInUseBytes int64 `json:"sizeInUseBytes"`
	Keys           int   `json:"keys"`
	// PageErrors are the first MaxPageErrors problems; PageErrorCount counts them all.
	PageErrors     []string `json:"pageErrors"`
	PageErrorCount int      `json:"pageErrorCount"`
}

// lockWait is how long etcdmedic waits for the db's file lock before concluding that a running
// etcd holds it.
const lockWait = 300 * time.Millisecond

// ErrLocked means a running etcd (or another process) holds the member's files; the error
// wrapping it names the file.
var ErrLocked = errors.New("locked by a running process (is etcd still running on this data dir?)")

// readBackend opens the db read-only and reads the small buckets and the newest revision. It
// touches a handful of pages, whatever the db's size; deep also walks every page.
func readBackend(path string, deep bool) (be *Backend, err error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	size, err := statSize(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	meta, err := readBboltMeta(f, size)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("db %s: %w", path, err)
	}
	// bbolt maps the file: a page that lies past a damaged file's end faults on access. Turn
	// such a fault into an error instead of a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			be, err = nil, fmt.Errorf("db %s is damaged: opening it failed (%v)", path, r)
		}
	}()
	// The freelist is not loaded. etcd stores none (NoFreelistSync), so bbolt would rebuild it
	// by walking every page in a goroutine of its own: a damaged page there kills the process,
	// and on a 1 GiB db out of the page cache the walk takes some 20 s. CheckPages counts the
	// free pages instead.
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: lockWait})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("the db file %s is %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open db %s read-only: %w", path, err)
	}
	// The page checks read under bbolt's shared file lock, which etcd's exclusive lock
	// excludes: the file does not change underneath.
	pc, err := checkShallowPages(path)
	if err == nil && pc.loop == "" && deep {
		pc, err = CheckPages(path)
	}
	switch {
	case err != nil:
		db.Close()
		return nil, err
	case pc.loop != "":
		db.Close()
		return nil, fmt.Errorf("db %s is damaged: a page of its B+tree points back at one of its ancestors (%s), which bbolt would follow forever%s", path, pc.loop, pageProblems(&pc))
	}
	be = &Backend{Path: path, FileBytes: size, PageSize: meta.PageSize, SizeBytes: int64(meta.HighPage) * int64(meta.PageSize), Alarms: []Alarm{}}
	if err := readBuckets(db, be, readDeadline, readBucketsGuarded); err != nil {
		if errors.Is(err, errDamaged) {
			return nil, fmt.Errorf("db %s is %w%s", path, err, pageProblems(&pc))
		}
		return nil, fmt.Errorf("db %s: %w%s", path, err, pageProblems(&pc))
	}
	if deep {
		be.Deep = deepCheck(pc)
	}
	return be, nil
}

// readDeadline bounds bbolt's reads of the few pages inspect needs. The page checks find the
// damage known to make bbolt loop; this is the last guard against damage they miss (a
// cursor stepping back from an empty page into a loop, say).
var readDeadline = 10 * time.Second

// errDamaged starts the error of a db whose read crashed or did not finish.
var errDamaged = errors.New("damaged")

// readBuckets runs read (readBucketsGuarded), which fills a Backend and closes db, in a
// goroutine of its own that must finish within deadline, and copies what it read into be.
// bbolt's cursors cannot be stopped: a read that does not finish is left running (it holds
// only its shared lock on the file and the mapping), and db is then never closed, as Close
// would wait for it.
func readBuckets(db *bolt.DB, be *Backend, deadline time.Duration, read func(*bolt.DB, *Backend) error) error {
	done := make(chan error, 1)
	got := &Backend{Alarms: []Alarm{}} // the goroutine's own: it may outlive this call
	go func() {
		done <- read(db, got)
	}()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-timer.C:
		return fmt.Errorf("%w: the read did not finish within %s (bbolt may be following a damaged page in circles)", errDamaged, deadline)
	}
	be.ConsistentIndex, be.Term, be.ConfState, be.StorageVersion = got.ConsistentIndex, got.Term, got.ConfState, got.StorageVersion
	be.CompactedRevision, be.Revision = got.CompactedRevision, got.Revision
	be.ClusterVersion, be.Downgrade = got.ClusterVersion, got.Downgrade
	be.Members, be.RemovedMembers, be.Alarms, be.AuthEnabled = got.Members, got.RemovedMembers, got.Alarms, got.AuthEnabled
	return nil
}

// readBucketsGuarded runs the bbolt reads with a page fault turned into an error, then closes
// db.
func readBucketsGuarded(db *bolt.DB, be *Backend) (err error) {
	defer db.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading it failed (%v)", errDamaged, r)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		if err := be.readMeta(tx.Bucket([]byte("meta"))); err != nil {
			return err
		}
		if err := be.readCluster(tx.Bucket([]byte("cluster"))); err != nil {
			return err
		}
		if err := be.readMembers(tx.Bucket([]byte("members")), tx.Bucket([]byte("members_removed"))); err != nil {
			return err
		}
		if err := be.readAlarms(tx.Bucket([]byte("alarm"))); err != nil {
			return err
		}
		be.readRevision(tx.Bucket([]byte("key")))
		if b := tx.Bucket([]byte("auth")); b != nil {
			v := b.Get([]byte("authEnabled"))
			be.AuthEnabled = len(v) == 1 && v[0] == 1
		}
		return nil
	})
}

func (be *Backend) readMeta(b *bolt.Bucket) error {
	if b == nil {
		return errors.New("no meta bucket: not an etcd backend")
	}
	if v := b.Get([]byte("consistent_index")); len(v) == 8 {
		be.ConsistentIndex = binary.BigEndian.Uint64(v)
	}
	if v := b.Get([]byte("term")); len(v) == 8 {
		be.Term = binary.BigEndian.Uint64(v)
	}
	if v := b.Get([]byte("confState")); v != nil {
		var cs struct {
			Voters   []uint64 `json:"voters"`
			Learners []uint64 `json:"learners"`
		}
		if err := json.Unmarshal(v, &cs); err != nil {
			return fmt.Errorf("meta/confState is not JSON: %w", err)
		}
		out := ConfState{Voters: []etcdmedic.ID{}, Learners: []etcdmedic.ID{}}
		for _, id := range cs.Voters {
			out.Voters = append(out.Voters, etcdmedic.ID(id))
		}
		for _, id := range cs.Learners {
			out.Learners = append(out.Learners, etcdmedic.ID(id))
		}
		be.ConfState = &out
	}
	if v := b.Get([]byte("storageVersion")); v != nil {
		be.StorageVersion = string(v)
	}
	if v := b.Get([]byte("finishedCompactRev")); len(v) >= 8 {
		be.CompactedRevision = int64(binary.BigEndian.Uint64(v[:8]))
	}
	return nil
}

func (be *Backend) readCluster(b *bolt.Bucket) error {
	if b == nil {
		return nil
	}
	if v := b.Get([]byte("clusterVersion")); v != nil {
		be.ClusterVersion = string(v)
	}
	if v := b.Get([]byte("downgrade")); v != nil {
		be.Downgrade = string(v)
	}
	return nil
}

// backendMember is the JSON etcd stores in the members bucket (membership.Member).
type backendMember struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	Name       string   `json:"name"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

func (be *Backend) readMembers(members, removed *bolt.Bucket) error {
	if members != nil {
		err := members.ForEach(func(k, v []byte) error {
			id, err := etcdmedic.ParseID(string(k))
			if err != nil {
				return fmt.Errorf("members bucket key %q: %w", k, err)
			}
			var m backendMember
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("members bucket record %s is not JSON: %w", id, err)
			}
			be.Members = append(be.Members, etcdmedic.Member{ID: id, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
			return nil
		})
		if err != nil {
			return err
		}
	}
	if removed != nil {
		err := removed.ForEach(func(k, v []byte) error {
			id, err := etcdmedic.ParseID(string(k))
			if err != nil {
				return fmt.Errorf("members_removed bucket key %q: %w", k, err)
			}
			be.RemovedMembers = append(be.RemovedMembers, id)
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Slice(be.RemovedMembers, func(i, j int) bool { return be.RemovedMembers[i] < be.RemovedMembers[j] })
	return nil
}

func (be *Backend) readAlarms(b *bolt.Bucket) error {
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		var am etcdserverpb.AlarmMember
		if err := proto.Unmarshal(k, &am); err != nil {
			return fmt.Errorf("alarm bucket key does not decode: %w", err)
		}
		be.Alarms = append(be.Alarms, Alarm{MemberID: etcdmedic.ID(am.GetMemberID()), Alarm: am.GetAlarm().String()})
		return nil
	})
}

// readRevision takes the current revision from the last key of the key bucket: a walk down
// the rightmost edge of the B+tree, a few pages whatever the db's size. Keys are
// 8-byte big-endian main revision, '_', 8-byte sub revision (mvcc/revision.go).
func (be *Backend) readRevision(b *bolt.Bucket) {
	if b != nil {
		if k, _ := b.Cursor().Last(); len(k) >= 8 {
			be.Revision = int64(binary.BigEndian.Uint64(k[:8]))
		}
	}
	// etcd starts at the compacted revision if every key at or above it was deleted.
	if be.Revision < be.CompactedRevision {
		be.Revision = be.CompactedRevision
	}
}

// deepCheck turns a page check into the report's figures: the number of keys, and the size in
// use (the db size less its free pages), which etcd reports as "DB SIZE IN USE".
func deepCheck(pc PageCheck) *DeepCheck {
	return &DeepCheck{
		SizeInUseBytes: int64(pc.HighWaterMark-uint64(pc.FreePages)) * int64(pc.PageSize),
		Keys:           pc.BucketKeys["key"],
		PageErrors:     append([]string{}, pc.Errors...),
		PageErrorCount: pc.ErrorCount,
	}
}

// pageProblems is what a page check found, for the error of a db that bbolt failed to read.
func pageProblems(pc *PageCheck) string {
	if pc == nil || pc.ErrorCount == 0 {
		return ""
	}
	return fmt.Sprintf("; the page check found %d problem(s), the first: %s", pc.ErrorCount, pc.Errors[0])
}
