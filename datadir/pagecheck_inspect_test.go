package datadir_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	. "github.com/etcdmedic/etcdmedic/datadir"
)

// inspect --deep on a real member whose db has one damaged page: the report names the page
// and the backend-corrupt finding follows; nothing panics, nothing hangs.

// damageDBPage rewrites the first page of page id of the db with change.
func damageDBPage(t *testing.T, db string, pageSize int, id uint64, change func(p []byte)) {
	t.Helper()
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, pageSize)
	if _, err := f.ReadAt(p, int64(id)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	change(p)
	if _, err := f.WriteAt(p, int64(id)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
}

// setChild points element i of a branch page at page child.
func setChild(p []byte, i int, child uint64) {
	binary.LittleEndian.PutUint64(p[16+16*i+8:], child)
}

func TestInspectDeepReportsDamagedPages(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		// damage returns the page to rewrite, how, and the problem the report must contain.
		// The damage stays off the pages inspect reads through bbolt (the small buckets and
		// the key bucket's last leaf), so the rest of the report stands.
		damage func(l DBPages) (uint64, func(p []byte), string)
		// freelist has bbolt write the freelist first: etcd on Linux does not (NoFreelistSync).
		freelist bool
	}{
		{"leaf element pointing past its page", func(l DBPages) (uint64, func([]byte), string) {
			return l.Children[0], func(p []byte) { le.PutUint32(p[16+16*1+4:], 0x7FFFFFFF) },
				fmt.Sprintf("page %d: element 1 (pos 2147483647", l.Children[0])
		}, false},
		{"garbage over a leaf page", func(l DBPages) (uint64, func([]byte), string) {
			return l.Children[0], func(p []byte) {
				r := rand.New(rand.NewPCG(3, 4))
				for i := range p {
					p[i] = byte(r.Uint32())
				}
			}, fmt.Sprintf("page %d: self identifies as page", l.Children[0])
		}, false},
		{"freelist count 0xFFFF with a huge value", func(l DBPages) (uint64, func([]byte), string) {
			return l.Freelist, func(p []byte) {
				le.PutUint16(p[10:], 0xFFFF)
				le.PutUint64(p[16:], 1<<62)
			}, fmt.Sprintf("page %d: freelist count %d does not fit", l.Freelist, uint64(1)<<62)
		}, true},
		{"child beyond the high-water mark", func(l DBPages) (uint64, func([]byte), string) {
			return l.BucketRoot, func(p []byte) { setChild(p, 0, l.HighWaterMark+1000) },
				fmt.Sprintf("page %d: out of bounds: %d", l.HighWaterMark+1000, l.HighWaterMark)
		}, false},
		{"page referenced twice", func(l DBPages) (uint64, func([]byte), string) {
			return l.BucketRoot, func(p []byte) { setChild(p, 0, l.Children[1]) },
				fmt.Sprintf("page %d: multiple references", l.Children[1])
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			db := filepath.Join(dir, "member", "snap", "db")
			if tc.freelist {
				storeFreelist(t, db)
			}
			l := bucketPages(t, db)
			page, change, want := tc.damage(l)
			damageDBPage(t, db, l.PageSize, page, change)
			r, err := Inspect(dir, Options{Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Backend == nil || r.Backend.Deep == nil {
				t.Fatalf("want a backend with a deep check, got error %q", r.BackendError)
			}
			d := r.Backend.Deep
			if !anyContains(d.PageErrors, want) || d.PageErrorCount < len(d.PageErrors) {
				t.Fatalf("want a page problem containing %q, got %d: %s", want, d.PageErrorCount, strings.Join(d.PageErrors, "\n"))
			}
			if r.Backend.Revision < 300 || r.Backend.ConsistentIndex == 0 {
				t.Errorf("the rest of the backend should still read: revision %d, consistent index %d", r.Backend.Revision, r.Backend.ConsistentIndex)
			}
			wantFinding(t, r, "backend-corrupt")
		})
	}
}

// Damage on the pages bbolt reads makes the db unreadable; the error still names the page.
func TestInspectDeepDamageBboltCannotRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(l DBPages) (uint64, func(p []byte), string)
	}{
		{"branch pointing back at itself", func(l DBPages) (uint64, func([]byte), string) {
			return l.BucketRoot, func(p []byte) { setChild(p, len(l.Children)-1, l.BucketRoot) },
				fmt.Sprintf("points back at one of its ancestors (page %d: multiple references", l.BucketRoot)
		}},
		{"garbage over the root bucket's page", func(l DBPages) (uint64, func([]byte), string) {
			return l.Root, func(p []byte) {
				for i := range p {
					p[i] = 0xA5
				}
			}, fmt.Sprintf("the first: page %d: self identifies as page", l.Root)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			db := filepath.Join(dir, "member", "snap", "db")
			l := bucketPages(t, db)
			page, change, want := tc.damage(l)
			damageDBPage(t, db, l.PageSize, page, change)
			r, err := Inspect(dir, Options{Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Backend != nil || !strings.Contains(r.BackendError, want) {
				t.Fatalf("want backend error containing %q, got %q", want, r.BackendError)
			}
			wantFinding(t, r, "backend-unreadable")
		})
	}
}

// bucketPages finds the key bucket of a member's db, which must be a branch page over leaves.
func bucketPages(t *testing.T, db string) DBPages {
	t.Helper()
	l, err := BucketPages(db, "key")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Children) < 3 {
		t.Fatalf("the fixture's key bucket should be a branch page over 3 leaves or more: %+v", l)
	}
	return l
}

// storeFreelist has bbolt commit an empty transaction that writes the freelist to the db.
func storeFreelist(t *testing.T, db string) {
	t.Helper()
	b, err := bolt.Open(db, 0o600, &bolt.Options{NoFreelistSync: false})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func anyContains(list []string, want string) bool {
	for _, s := range list {
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}

// Without --deep, inspect still checks the pages its bbolt reads touch: a page pointing back at
// an ancestor there is backend-unreadable at once. Before, Cursor.Last followed the key
// bucket's loop forever, growing memory (review item 3), and a loop in the root bucket sent
// bbolt's recursive seek into a fatal stack overflow.
func TestInspectFindsALoopOnThePagesItReads(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	for _, tc := range []struct {
		name   string
		damage func(l DBPages) (uint64, func(p []byte), string)
	}{
		{"key bucket's last child pointing back at its root", func(l DBPages) (uint64, func([]byte), string) {
			return l.BucketRoot, func(p []byte) { setChild(p, len(l.Children)-1, l.BucketRoot) },
				fmt.Sprintf("points back at one of its ancestors (page %d: multiple references", l.BucketRoot)
		}},
		{"the root bucket's page made a branch over itself", func(l DBPages) (uint64, func([]byte), string) {
			return l.Root, func(p []byte) {
				le.PutUint16(p[8:], 0x01) // branch
				le.PutUint16(p[10:], 1)
				le.PutUint32(p[16:], 16) // the key right after the element table
				le.PutUint32(p[20:], 0)
				setChild(p, 0, l.Root)
			}, fmt.Sprintf("points back at one of its ancestors (page %d: multiple references", l.Root)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			db := filepath.Join(dir, "member", "snap", "db")
			l := bucketPages(t, db)
			page, change, want := tc.damage(l)
			damageDBPage(t, db, l.PageSize, page, change)
			type result struct {
				r   *Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := Inspect(dir, Options{})
				done <- result{r, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(time.Minute):
				t.Fatal("inspect without --deep did not return within a minute on a db whose B+tree loops")
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.r.Backend != nil || !strings.Contains(res.r.BackendError, want) {
				t.Fatalf("want backend error containing %q, got %q", want, res.r.BackendError)
			}
			wantFinding(t, res.r, "backend-unreadable")
		})
	}
}
