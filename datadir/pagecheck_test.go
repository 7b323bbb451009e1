package datadir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The page check is bbolt's tx.Check on bytes read with ReadAt: on a db bbolt wrote it agrees
// with bbolt (no problem, the same keys and free pages), and on a db with one damaged page it
// names that page and never panics.

// testDBLayout is where buildTestDB's buckets landed, read back through bbolt.
type testDBLayout struct {
	path     string
	pageSize int
	hwm      uint64
	freelist uint64
	keyRoot  uint64   // the branch page at the root of bucket "key"
	keyKids  []uint64 // the pages it points at (branch pages)
	leaves   []uint64 // the leaves below its first child
	bigLeaf  uint64   // a leaf of bucket "big" with overflow pages
	rootPage uint64   // the root bucket's leaf: one element per top-level bucket
}

// buildTestDB writes a bbolt file like etcd's: a large "key" bucket (a branch page over ~100
// leaves), values larger than a page, a nested bucket with a tree of its own, inline buckets,
// and free pages left by a deletion.
func buildTestDB(t testing.TB, dir string, opts *bolt.Options) testDBLayout {
	t.Helper()
	path := filepath.Join(dir, "db")
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := bytes.Repeat([]byte("v"), 100)
	scale := db.Info().PageSize / 4096 // the same tree shape whatever the page size
	err = db.Update(func(tx *bolt.Tx) error {
		key, _ := tx.CreateBucket([]byte("key"))
		for i := range 3000 * scale * scale {
			key.Put(fmt.Appendf(nil, "k%06d", i), val)
		}
		big, _ := tx.CreateBucket([]byte("big"))
		for i := range 5 {
			big.Put(fmt.Appendf(nil, "big%d", i), bytes.Repeat([]byte{byte(i)}, 20000*scale))
		}
		nest, _ := tx.CreateBucket([]byte("nest"))
		child, _ := nest.CreateBucket([]byte("child"))
		for i := range 1000 {
			child.Put(fmt.Appendf(nil, "c%05d", i), val[:40])
		}
		tiny, _ := nest.CreateBucket([]byte("tiny"))
		tiny.Put([]byte("a"), []byte("1"))
		tiny.Put([]byte("b"), []byte("2"))
		inline, _ := tx.CreateBucket([]byte("inline"))
		return inline.Put([]byte("only"), []byte("one"))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		key := tx.Bucket([]byte("key"))
		for i := 1000; i < 1500; i++ {
			key.Delete(fmt.Appendf(nil, "k%06d", i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l := testDBLayout{path: path, pageSize: db.Info().PageSize}
	db.View(func(tx *bolt.Tx) error {
		l.keyRoot = uint64(tx.Bucket([]byte("key")).Root())
		return nil
	})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	meta, err := readBboltMeta(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	l.hwm, l.freelist, l.rootPage = meta.HighPage, meta.Freelist, meta.Root
	root := l.page(t)(l.keyRoot)
	if parsePageHeader(root).flags != pageBranch {
		t.Fatalf("bucket key's root page %d is not a branch page", l.keyRoot)
	}
	l.keyKids = children(root)
	l.leaves = children(l.page(t)(l.keyKids[0]))
	if len(l.keyKids) < 2 || len(l.leaves) < 6 || parsePageHeader(l.page(t)(l.leaves[0])).flags != pageLeaf {
		t.Fatalf("bucket key's tree is not a branch over branches over leaves: %v, %v", l.keyKids, l.leaves)
	}
	db.View(func(tx *bolt.Tx) error {
		big := uint64(tx.Bucket([]byte("big")).Root())
		if p := l.page(t)(big); parsePageHeader(p).flags == pageBranch {
			big = binary.LittleEndian.Uint64(p[bboltPageHeader+8:])
		}
		l.bigLeaf = big
		return nil
	})
	if h := parsePageHeader(l.page(t)(l.bigLeaf)); h.flags != pageLeaf || h.overflow == 0 {
		t.Fatalf("bucket big's first leaf %d has no overflow pages: %+v", l.bigLeaf, h)
	}
	return l
}

// page returns a reader of one page of the file (its first page only).
func (l testDBLayout) page(t testing.TB) func(id uint64) []byte {
	return func(id uint64) []byte {
		t.Helper()
		b := make([]byte, l.pageSize)
		f, err := os.Open(l.path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(b, int64(id)*int64(l.pageSize)); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// damagePage rewrites the first page of page id of the file at path with change.
func damagePage(t testing.TB, path string, pageSize int, id uint64, change func(p []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
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

// children returns the pages a branch page points at.
func children(p []byte) []uint64 {
	var out []uint64
	for i := range int(parsePageHeader(p).count) {
		out = append(out, binary.LittleEndian.Uint64(element(p, i)[8:]))
	}
	return out
}

// element returns the 16-byte element i of a page.
func element(p []byte, i int) []byte {
	return p[bboltPageHeader+i*pageElementBytes : bboltPageHeader+(i+1)*pageElementBytes]
}

// bucketValue returns where, in the root bucket's leaf page p, the value of bucket name starts.
func bucketValue(t testing.TB, p []byte, name string) int {
	t.Helper()
	le := binary.LittleEndian
	for i := range int(parsePageHeader(p).count) {
		e := bboltPageHeader + i*pageElementBytes
		pos := e + int(le.Uint32(p[e+4:]))
		ksize := int(le.Uint32(p[e+8:]))
		if string(p[pos:pos+ksize]) == name {
			return pos + ksize
		}
	}
	t.Fatalf("no bucket %q on the root page", name)
	return 0
}

// boltCheck runs bbolt's own checker on an undamaged file.
func boltCheck(t testing.TB, path string) (errs []error, keys map[string]int, free int) {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys = map[string]int{}
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			keys[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	st := db.Stats()
	return errs, keys, st.FreePageN + st.PendingPageN
}

func TestCheckPagesAgreesWithBboltOnAnUndamagedDB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts *bolt.Options
	}{
		{"freelist stored", &bolt.Options{PageSize: 4096}},
		{"no freelist stored", &bolt.Options{PageSize: 4096, NoFreelistSync: true}},
		{"16 KiB pages", &bolt.Options{PageSize: 16384}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := buildTestDB(t, t.TempDir(), tc.opts)
			pc, err := CheckPages(l.path)
			if err != nil {
				t.Fatal(err)
			}
			boltErrs, boltKeys, boltFree := boltCheck(t, l.path)
			if !pc.OK() || len(pc.Errors) != 0 || len(boltErrs) != 0 {
				t.Fatalf("want no problem from either check: ours %v, bbolt's %v", pc.Errors, boltErrs)
			}
			if fmt.Sprint(pc.BucketKeys) != fmt.Sprint(boltKeys) {
				t.Errorf("keys per bucket: ours %v, bbolt's %v", pc.BucketKeys, boltKeys)
			}
			if pc.FreePages != boltFree || pc.FreePages == 0 {
				t.Errorf("free pages: ours %d, bbolt's %d", pc.FreePages, boltFree)
			}
			if uint64(pc.ReachablePages+pc.FreePages) != pc.HighWaterMark || pc.HighWaterMark != l.hwm {
				t.Errorf("%d reachable + %d free pages, high-water mark %d", pc.ReachablePages, pc.FreePages, pc.HighWaterMark)
			}
		})
	}
}

// Each way of damaging one page, and the problem that must name it.
func TestCheckPagesNamesTheDamagedPage(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	for _, tc := range []struct {
		name   string
		damage func(l testDBLayout) (page uint64, change func(p []byte))
		want   func(l testDBLayout) string
		loop   bool
	}{
		{"garbage over a branch page",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) {
					r := rand.New(rand.NewPCG(1, 2))
					for i := range p {
						p[i] = byte(r.Uint32())
					}
				}
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: self identifies as page", l.keyRoot) }, false},
		{"branch element pointing past the page",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) { le.PutUint32(element(p, 0), 0xFFFFFF00) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: element 0 (pos 4294967040, key 7 bytes, value 0 bytes) lies past the end of the page (4096 bytes)", l.keyRoot)
			}, false},
		{"leaf element pointing past the page",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[1], func(p []byte) { le.PutUint32(element(p, 2)[4:], 5000) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: element 2 (pos 5000, key 7 bytes, value 100 bytes) lies past the end of the page", l.leaves[1])
			}, false},
		{"leaf value longer than the page and its overflow",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.bigLeaf, func(p []byte) { le.PutUint32(element(p, 0)[12:], 1<<30) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: element 0 ", l.bigLeaf) }, false},
		{"elements overlapping",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[1], func(p []byte) { copy(element(p, 3)[4:8], element(p, 2)[4:8]) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: element 3 (pos 438) overlaps the element table or the element before it", l.leaves[1])
			}, false},
		{"header carrying another page's id",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[2], func(p []byte) { le.PutUint64(p, 123456789) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: self identifies as page 123456789", l.leaves[2])
			}, false},
		{"header flags garbage",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[3], func(p []byte) { le.PutUint16(p[8:], 0x80) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: invalid type: unknown<80>", l.leaves[3]) }, false},
		{"a leaf where a meta page should not be",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[3], func(p []byte) { le.PutUint16(p[8:], pageMeta) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: invalid type: meta", l.leaves[3]) }, false},
		{"overflow past the high-water mark",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.bigLeaf, func(p []byte) { le.PutUint32(p[12:], 0xFFFFFFF0) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: overflow of 4294967280 pages runs past the high-water mark", l.bigLeaf)
			}, false},
		{"element count larger than the page",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[4], func(p []byte) { le.PutUint16(p[10:], 0xFFFE) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: 65534 elements do not fit in its 4096 bytes", l.leaves[4])
			}, false},
		{"freelist count 0xFFFF with a huge value",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.freelist, func(p []byte) {
					le.PutUint16(p[10:], 0xFFFF)
					le.PutUint64(p[16:], 1<<40)
				}
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: freelist count 1099511627776 does not fit in its", l.freelist)
			}, false},
		{"freelist naming a reachable page",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.freelist, func(p []byte) { le.PutUint64(p[16:], l.leaves[0]) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: reachable freed", l.leaves[0]) }, false},
		{"freelist naming a page past the high-water mark",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.freelist, func(p []byte) { le.PutUint64(p[16:], l.hwm+7) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: on the freelist (page %d) but out of bounds: %d", l.hwm+7, l.freelist, l.hwm)
			}, false},
		{"child beyond the high-water mark",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) { le.PutUint64(element(p, 1)[8:], l.hwm+100) }
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: out of bounds: %d (stack: [%d %d])", l.hwm+100, l.hwm, l.rootPage, l.keyRoot)
			}, false},
		{"page referenced twice",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) { le.PutUint64(element(p, 1)[8:], l.keyKids[0]) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: multiple references", l.keyKids[0]) }, false},
		{"branch pointing back at itself",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) { le.PutUint64(element(p, 1)[8:], l.keyRoot) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: multiple references", l.keyRoot) }, true},
		{"keys out of order",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.leaves[5], func(p []byte) {
					e := element(p, 3)
					p[bboltPageHeader+3*pageElementBytes+int(le.Uint32(e[4:]))] = 'a' // k... becomes a...
				}
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("on leaf page(%d) needs to be > (found <) than previous element", l.leaves[5])
			}, false},
		{"nested bucket rooted past the high-water mark",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.rootPage, func(p []byte) { le.PutUint64(p[bucketValue(t, p, "nest"):], l.hwm+5) }
			},
			func(l testDBLayout) string { return fmt.Sprintf("page %d: out of bounds", l.hwm+5) }, false},
		{"inline bucket with too many elements",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.rootPage, func(p []byte) {
					v := bucketValue(t, p, "inline")
					le.PutUint16(p[v+bucketHeaderBytes+10:], 500)
				}
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: inline bucket (hex)696e6c696e65: 500 elements do not fit", l.rootPage)
			}, false},
		{"inline bucket holding a bucket",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.rootPage, func(p []byte) {
					v := bucketValue(t, p, "inline") + bucketHeaderBytes
					le.PutUint32(element(p[v:], 0), leafBucketFlag)
				}
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: inline bucket (hex)696e6c696e65 holds bucket (hex)6f6e6c79, which bbolt never writes", l.rootPage)
			}, false},
		{"bucket value cut short",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.rootPage, func(p []byte) {
					for i := range int(parsePageHeader(p).count) {
						if e := element(p, i); string(p[bboltPageHeader+i*pageElementBytes+int(le.Uint32(e[4:])):][:3]) == "big" {
							le.PutUint32(e[12:], 3)
						}
					}
				}
			},
			func(l testDBLayout) string {
				return fmt.Sprintf("page %d: bucket (hex)626967: value of 3 bytes is shorter than a bucket header", l.rootPage)
			}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := buildTestDB(t, t.TempDir(), &bolt.Options{PageSize: 4096})
			page, change := tc.damage(l)
			damagePage(t, l.path, l.pageSize, page, change)
			pc, err := CheckPages(l.path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d problem(s): %s", pc.ErrorCount, strings.Join(pc.Errors[:min(4, len(pc.Errors))], " | "))
			want := tc.want(l)
			if !containsProblem(pc.Errors, want) {
				t.Fatalf("want a problem containing %q, got %d: %s", want, pc.ErrorCount, strings.Join(pc.Errors, "\n"))
			}
			if pc.ErrorCount < len(pc.Errors) || len(pc.Errors) > MaxPageErrors {
				t.Errorf("%d problems counted, %d kept", pc.ErrorCount, len(pc.Errors))
			}
			if (pc.loop != "") != tc.loop {
				t.Errorf("loop %q, want a loop: %v", pc.loop, tc.loop)
			}
		})
	}
}

func containsProblem(errs []string, want string) bool {
	for _, e := range errs {
		if strings.Contains(e, want) {
			return true
		}
	}
	return false
}

// Many damaged pages: the list stops at MaxPageErrors, the count goes on.
func TestCheckPagesCapsTheListButCountsEverything(t *testing.T) {
	t.Parallel()
	l := buildTestDB(t, t.TempDir(), &bolt.Options{PageSize: 4096})
	for _, id := range l.leaves {
		damagePage(t, l.path, l.pageSize, id, func(p []byte) { binary.LittleEndian.PutUint16(p[8:], 0x40) })
	}
	pc, err := CheckPages(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Errors) != MaxPageErrors || pc.ErrorCount < len(l.leaves) {
		t.Fatalf("%d kept, %d counted, %d pages damaged", len(pc.Errors), pc.ErrorCount, len(l.leaves))
	}
}

// A file that is not a bbolt db, or cannot be read, is an error, not a list of problems.
func TestCheckPagesUnreadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zeros := filepath.Join(dir, "zeros")
	os.WriteFile(zeros, make([]byte, 16384), 0o600)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{zeros, "neither bbolt meta page is valid"},
		{dir, "is a directory"},
	} {
		if _, err := CheckPages(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.path, tc.want, err)
		}
	}
}

// smallDB is the bytes of a bbolt file of 512-byte pages with every kind of page: branch,
// leaf, overflow, nested and inline buckets, freelist. It seeds the fuzzer.
func smallDB(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("key"))
		for i := range 40 {
			b.Put(fmt.Appendf(nil, "k%03d", i), []byte("value"))
		}
		b.Put([]byte("large"), bytes.Repeat([]byte("x"), 1200))
		n, _ := tx.CreateBucket([]byte("nest"))
		c, _ := n.CreateBucket([]byte("child"))
		for i := range 30 {
			c.Put(fmt.Appendf(nil, "c%03d", i), []byte("v"))
		}
		in, _ := n.CreateBucket([]byte("inline"))
		return in.Put([]byte("a"), []byte("b"))
	})
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("key")).Delete([]byte("k001")) })
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := readBboltMeta(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return b[:meta.HighPage*512] // bbolt grows the file ahead; the fuzzer needs no tail
}

// resignMetas recomputes both meta pages' checksums, so that a mutation of their fields gets
// past the checksum and reaches the walk.
func resignMetas(b []byte) {
	le := binary.LittleEndian
	pageSize := 4096
	if len(b) >= bboltPageHeader+bboltMetaBytes {
		pageSize = int(le.Uint32(b[bboltPageHeader+8:]))
	}
	for _, off := range []int{0, pageSize} {
		if off < 0 || off > len(b)-(bboltPageHeader+bboltMetaBytes) {
			continue
		}
		m := b[off+bboltPageHeader : off+bboltPageHeader+bboltMetaBytes]
		h := fnv.New64a()
		h.Write(m[:bboltMetaSumSpan])
		le.PutUint64(m[bboltMetaSumSpan:], h.Sum64())
	}
}

func FuzzPageCheck(f *testing.F) {
	seed := smallDB(f)
	f.Add(seed, true)
	f.Add(seed, false)
	f.Add(seed[:len(seed)/2], true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, resign bool) {
		if resign {
			resignMetas(b)
		}
		pc, err := checkPagesAt(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if len(pc.Errors) > MaxPageErrors || pc.ErrorCount < len(pc.Errors) || uint64(pc.ReachablePages) > pc.HighWaterMark {
			t.Fatalf("%d problems kept, %d counted, %d pages reached of %d", len(pc.Errors), pc.ErrorCount, pc.ReachablePages, pc.HighWaterMark)
		}
		if pc.OK() && uint64(pc.ReachablePages+pc.FreePages) != pc.HighWaterMark {
			t.Fatalf("no problem, yet %d reachable + %d free pages of %d", pc.ReachablePages, pc.FreePages, pc.HighWaterMark)
		}
	})
}

// The fuzz seed is a db bbolt itself finds sound, and so does the page check.
func TestSmallDBSeedIsSound(t *testing.T) {
	t.Parallel()
	b := smallDB(t)
	path := filepath.Join(t.TempDir(), "db")
	os.WriteFile(path, b, 0o600)
	pc, err := CheckPages(path)
	boltErrs, _, _ := boltCheck(t, path)
	t.Logf("seed: %d bytes, %d pages reached, %d free", len(b), pc.ReachablePages, pc.FreePages)
	if err != nil || !pc.OK() || len(boltErrs) != 0 || pc.ReachablePages < 10 {
		t.Fatalf("ours %+v %v, bbolt's %v", pc, err, boltErrs)
	}
}

// buildBenchDB writes a db shaped like etcd's of about size bytes: revision keys in bucket
// "key", appended in order (etcd's fill percent of 0.9), values of 300 bytes.
func buildBenchDB(tb testing.TB, path string, size int64) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	val := bytes.Repeat([]byte("v"), 300)
	keys := size / 340
	for rev := int64(0); rev < keys; {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			b.FillPercent = 0.9
			for end := min(rev+100000, keys); rev < end; rev++ {
				k := binary.BigEndian.AppendUint64(nil, uint64(rev))
				k = binary.BigEndian.AppendUint64(append(k, '_'), 0)
				if err := b.Put(k, val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkCheckPages compares the page check with bbolt's tx.Check on one undamaged db:
// ETCDMEDIC_BENCH_DB names an existing file (built once with ETCDMEDIC_BENCH_DB_MIB MiB if
// missing); without it, a 32 MiB db in a temporary dir.
func BenchmarkCheckPages(b *testing.B) {
	path := os.Getenv("ETCDMEDIC_BENCH_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "db")
	}
	if _, err := os.Stat(path); err != nil {
		mib := int64(32)
		fmt.Sscan(os.Getenv("ETCDMEDIC_BENCH_DB_MIB"), &mib)
		buildBenchDB(b, path, mib<<20)
	}
	st, _ := os.Stat(path)
	b.Run("CheckPages", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			pc, err := CheckPages(path)
			if err != nil || !pc.OK() {
				b.Fatal(err, pc.Errors)
			}
		}
	})
	b.Run("bbolt-tx.Check", func(b *testing.B) {
		b.SetBytes(st.Size())
		db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for b.Loop() {
			db.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					b.Fatal(err)
				}
				return nil
			})
		}
	})
}

// The shallow check reads only the pages inspect's bbolt reads touch (the small buckets whole,
// the right edge of key): a loop there is found, damage elsewhere is left to --deep, and it
// reads a few pages, not the whole file.
func TestCheckShallowPagesFollowsOnlyWhatBboltReads(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	lastChild := func(p []byte) int { return int(parsePageHeader(p).count) - 1 }
	for _, tc := range []struct {
		name   string
		damage func(l testDBLayout) (page uint64, change func(p []byte))
		// loop: the shallow check finds a loop; deepLoop: the full check does.
		loop, deepLoop bool
	}{
		{"undamaged", nil, false, false},
		{"a branch on key's right edge pointing back at key's root",
			func(l testDBLayout) (uint64, func([]byte)) {
				last := l.keyKids[len(l.keyKids)-1]
				return last, func(p []byte) { le.PutUint64(element(p, lastChild(p))[8:], l.keyRoot) }
			}, true, true},
		{"key's root pointing its last element at itself",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyRoot, func(p []byte) { le.PutUint64(element(p, lastChild(p))[8:], l.keyRoot) }
			}, true, true},
		{"a branch off key's right edge pointing back (Cursor.Last never goes there)",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.keyKids[0], func(p []byte) { le.PutUint64(element(p, lastChild(p))[8:], l.keyRoot) }
			}, false, true},
		{"the root bucket's page made a branch over itself",
			func(l testDBLayout) (uint64, func([]byte)) {
				return l.rootPage, func(p []byte) {
					le.PutUint16(p[8:], pageBranch)
					le.PutUint16(p[10:], 1)
					e := element(p, 0)
					le.PutUint32(e[0:], pageElementBytes) // the key right after the table
					le.PutUint32(e[4:], 0)
					le.PutUint64(e[8:], l.rootPage)
				}
			}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := buildTestDB(t, t.TempDir(), &bolt.Options{PageSize: 4096})
			if tc.damage != nil {
				page, change := tc.damage(l)
				damagePage(t, l.path, l.pageSize, page, change)
			}
			pc, err := checkShallowPages(l.path)
			if err != nil {
				t.Fatal(err)
			}
			if (pc.loop != "") != tc.loop {
				t.Errorf("shallow check: loop %q, want a loop: %v (problems: %v)", pc.loop, tc.loop, pc.Errors)
			}
			if tc.damage == nil && (!pc.OK() || pc.ReachablePages > 10) {
				t.Errorf("an undamaged db: %d problem(s) %v, %d pages read (want a few)", pc.ErrorCount, pc.Errors, pc.ReachablePages)
			}
			full, err := CheckPages(l.path)
			if err != nil {
				t.Fatal(err)
			}
			if (full.loop != "") != tc.deepLoop {
				t.Errorf("full check: loop %q, want a loop: %v", full.loop, tc.deepLoop)
			}
		})
	}
}

// A bbolt read that does not finish (damage the page checks miss) is given up at the deadline
// with an error, never waited for.
func TestReadBucketsGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	l := buildTestDB(t, t.TempDir(), &bolt.Options{PageSize: 4096})
	db, err := bolt.Open(l.path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := func(db *bolt.DB, be *Backend) error {
		defer db.Close()
		be.Revision = 42
		<-release // a cursor going round a loop
		return nil
	}
	be := &Backend{}
	start := time.Now()
	err = readBuckets(db, be, 200*time.Millisecond, stuck)
	if !errors.Is(err, errDamaged) || !strings.Contains(err.Error(), "the read did not finish within 200ms") {
		t.Fatalf("want the damaged-read error, got %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gave up after %s", took)
	}
	if be.Revision != 0 {
		t.Errorf("an unfinished read must leave the backend unfilled, got revision %d", be.Revision)
	}
}
