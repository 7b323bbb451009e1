package datadir

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
)

// bbolt's page layout (go.etcd.io/bbolt internal/common/page.go, bucket.go): a 16-byte header
// (id uint64, flags uint16, count uint16, overflow uint32), then count 16-byte elements whose
// pos is counted from the element itself.
const (
	pageBranch        = 0x01
	pageLeaf          = 0x02
	pageMeta          = 0x04
	pageFreelist      = 0x10
	leafBucketFlag    = 0x01
	pageElementBytes  = 16
	bucketHeaderBytes = 16 // root pgid, sequence
	noFreelist        = ^uint64(0)
	// maxPageDepth bounds B+tree levels and nested buckets together; etcd's db has 2 levels
	// of buckets and a few of pages. Deeper is damage (or a loop) and is not followed.
	maxPageDepth = 64
	// MaxPageErrors is how many problems a PageCheck keeps; it counts them all.
	MaxPageErrors = 20
	maxKeyInError = 32 // bytes of a key quoted (in hex) in a problem
)

// PageCheck is what reading every page of a bbolt file found: bbolt's tx.Check, done on bytes
// read with ReadAt in the caller's goroutine, so that a damaged page is a problem in the list,
// never a crash. bbolt walks the pages in goroutines of its own (tx.Check, and the rebuild of
// the freelist of a db that stores none, as etcd's on Linux), where a damaged page panics and
// kills the process.
type PageCheck struct {
	PageSize uint32 `json:"pageSize"`
	TxID     uint64 `json:"txid"`
	// HighWaterMark is the meta page's pgid: pages [0, HighWaterMark) make up the db.
	HighWaterMark uint64 `json:"highWaterMark"`
	// ReachablePages counts the pages reached: both meta pages, the freelist, and every page
	// of every bucket's B+tree, overflow pages included.
	ReachablePages int `json:"reachablePages"`
	// FreePages counts the pages on the stored freelist; when none is stored (or it is
	// unreadable), the pages below the high-water mark that nothing reaches, as bbolt counts.
	FreePages int `json:"freePages"`
	// BucketKeys is the number of keys of each top-level bucket, its nested buckets' keys and
	// the nested buckets themselves included (bbolt's Bucket.Stats().KeyN).
	BucketKeys map[string]int `json:"bucketKeys"`
	// Errors are the first MaxPageErrors problems, each naming its page, worded as bbolt's
	// checker words them where it has the same check.
	Errors []string `json:"errors"`
	// ErrorCount counts every problem, including those past MaxPageErrors.
	ErrorCount int `json:"errorCount"`
	// loop is the problem naming a page that is its own ancestor, where bbolt's cursors would
	// never return; empty if there is none.
	loop string
}

// OK reports whether the check found no problem.
func (pc PageCheck) OK() bool { return pc.ErrorCount == 0 }

// CheckPages reads the bbolt file at dbPath page by page and checks what bbolt's tx.Check
// checks: every page reached from the root bucket lies below the high-water mark, carries its
// own id and a branch or leaf type, is reached once, and is not free; elements lie inside
// their page; keys are in order; and every page is either reachable or on the freelist. It
// returns an error only when the file cannot be read or has no valid meta page; damage past
// the meta page is reported in PageCheck.Errors. It takes one pass over the reachable pages
// and memory of two bits per page (plus the freelist).
func CheckPages(dbPath string) (PageCheck, error) {
	return checkDB(dbPath, checkPagesAt)
}

// checkDB opens the bbolt file at dbPath (read only) and runs check over it.
func checkDB(dbPath string, check func(r io.ReaderAt, size int64) (PageCheck, error)) (PageCheck, error) {
	f, err := os.Open(dbPath)
	if err != nil {
		return PageCheck{}, err
	}
	defer f.Close()
	size, err := statSize(f)
	if err != nil {
		return PageCheck{}, err
	}
	pc, err := check(f, size)
	if err != nil {
		return PageCheck{}, fmt.Errorf("check the pages of db %s: %w", dbPath, err)
	}
	return pc, nil
}

// checkPagesAt checks the bbolt file held by r, size bytes long.
func checkPagesAt(r io.ReaderAt, size int64) (PageCheck, error) {
	meta, err := readBboltMeta(r, size)
	if err != nil {
		return PageCheck{}, err
	}
	if meta.HighPage < 3 {
		return PageCheck{}, fmt.Errorf("db meta page says the db has %d pages: fewer than its two meta pages and a root", meta.HighPage)
	}
	w := newPageWalker(r, meta)
	w.reach(0)
	w.reach(1)
	freelistRead := w.readFreelist(meta.Freelist)
	w.checkBucketTree(meta.Root, nil, 0)
	unreached := 0
	for id := uint64(2); id < w.hwm; id++ {
		if w.reached.has(id) || w.freed.has(id) {
			continue
		}
		unreached++
		if freelistRead {
			w.problem("page %d: unreachable unfreed", id)
		}
	}
	if !freelistRead {
		w.pc.FreePages = unreached
	}
	return w.pc, nil
}

// newPageWalker starts a walk of the bbolt file held by r. readBboltMeta vouches that the
// high-water mark lies within the file, so every page below it can be read, and the bitmaps
// are bounded by the file's size.
func newPageWalker(r io.ReaderAt, meta *bboltMeta) *pageWalker {
	return &pageWalker{
		r: r, pageSize: int(meta.PageSize), hwm: meta.HighPage, end: int64(meta.HighPage) * int64(meta.PageSize),
		reached: newPageSet(meta.HighPage), freed: newPageSet(meta.HighPage),
		pc: PageCheck{PageSize: meta.PageSize, TxID: meta.TxID, HighWaterMark: meta.HighPage, BucketKeys: map[string]int{}, Errors: []string{}},
	}
}

// The buckets inspect reads through bbolt without --deep: read whole (Get, ForEach), or only
// down the right edge of their B+tree (Cursor.Last on key, for the current revision).
var (
	shallowWholeBuckets = map[string]bool{"meta": true, "cluster": true, "members": true, "members_removed": true, "alarm": true, "auth": true}
	shallowEdgeBuckets  = map[string]bool{"key": true}
)

// checkShallowPages checks only the pages readBackend's bbolt reads touch: the root bucket,
// the small buckets whole, and the right edge of key. bbolt's cursors follow a page that
// points back at an ancestor forever (Cursor.last has no bound), so a loop there must be
// found before bbolt reads the file. It costs a few pages whatever the db's size; the
// freelist is not read and unreached pages are not counted.
func checkShallowPages(dbPath string) (PageCheck, error) {
	return checkDB(dbPath, func(r io.ReaderAt, size int64) (PageCheck, error) {
		meta, err := readBboltMeta(r, size)
		if err != nil {
			return PageCheck{}, err
		}
		w := newPageWalker(r, meta)
		w.shallow = true
		w.checkBucketTree(meta.Root, nil, 0)
		return w.pc, nil
	})
}

// pageSet is a bitmap of page ids below the high-water mark.
type pageSet []uint64

func newPageSet(n uint64) pageSet    { return make(pageSet, (n+63)/64) }
func (s pageSet) has(id uint64) bool { return s[id/64]&(1<<(id%64)) != 0 }
func (s pageSet) add(id uint64)      { s[id/64] |= 1 << (id % 64) }

// pageWalker walks a bbolt file's B+trees depth first.
type pageWalker struct {
	r        io.ReaderAt
	pageSize int
	hwm      uint64
	reached  pageSet
	freed    pageSet
	stack    []uint64 // pages from the root bucket's root to the page being read
	bufs     [][]byte // one read buffer per depth: a parent's keys stay valid below it
	win      []byte   // pages read ahead, from offset winOff
	winOff   int64
	ahead    int64 // the size of the next window
	next     int64 // the offset after the last page read
	end      int64 // the offset of the high-water mark: nothing past it is read ahead
	pc       PageCheck
	// shallow walks only the buckets inspect reads without --deep (checkShallowPages); edge
	// is set inside one of which only the right edge is read.
	shallow bool
	edge    bool
}

func (w *pageWalker) problem(format string, args ...any) {
	w.pc.ErrorCount++
	if len(w.pc.Errors) < MaxPageErrors {
		w.pc.Errors = append(w.pc.Errors, fmt.Sprintf(format, args...))
	}
}

// reach marks a page reached and counts it once.
func (w *pageWalker) reach(id uint64) {
	if !w.reached.has(id) {
		w.reached.add(id)
		w.pc.ReachablePages++
	}
}

// read returns bytes [0, n) of the page run starting at id, in the buffer of depth.
func (w *pageWalker) read(id uint64, n, depth int) ([]byte, error) {
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	if cap(w.bufs[depth]) < n {
		w.bufs[depth] = make([]byte, n)
	}
	b := w.bufs[depth][:n]
	off := int64(id) * int64(w.pageSize)
	if err := w.readAhead(b, off); err != nil {
		return nil, err
	}
	w.next = off + int64(n)
	return b, nil
}

// Reads ahead, where pages are read in file order (as a compacted db's leaves are), grow from
// minReadAhead to maxReadAhead while each window is used up to its end: one read call per 64
// pages of 4 KiB instead of one per page. Pages read out of order cost no more than themselves.
const (
	minReadAhead = 32 << 10
	maxReadAhead = 256 << 10
)

// readAhead fills b from offset off: from the window read ahead if it holds it; with a new
// window if off follows the previous read closely; else with one read of its own.
func (w *pageWalker) readAhead(b []byte, off int64) error {
	if off >= w.winOff && off+int64(len(b)) <= w.winOff+int64(len(w.win)) {
		copy(b, w.win[off-w.winOff:])
		return nil
	}
	if off == w.winOff+int64(len(w.win)) {
		w.ahead = min(2*w.ahead, maxReadAhead)
	} else {
		w.ahead = minReadAhead
	}
	end := min(off+w.ahead, w.end)
	if off < w.next || off >= w.next+minReadAhead || end < off+int64(len(b)) {
		_, err := w.r.ReadAt(b, off)
		return err
	}
	if w.win == nil {
		w.win = make([]byte, maxReadAhead)
	}
	w.win = w.win[:end-off]
	if _, err := w.r.ReadAt(w.win, off); err != nil {
		w.win = w.win[:0]
		return err
	}
	w.winOff = off
	copy(b, w.win)
	return nil
}

// pageHeader is bbolt's common.Page.
type pageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func parsePageHeader(b []byte) pageHeader {
	le := binary.LittleEndian
	return pageHeader{id: le.Uint64(b[0:]), flags: le.Uint16(b[8:]), count: le.Uint16(b[10:]), overflow: le.Uint32(b[12:])}
}

// pageType names a page's flags as bbolt's Page.Typ does.
func pageType(flags uint16) string {
	switch flags {
	case pageBranch:
		return "branch"
	case pageLeaf:
		return "leaf"
	case pageMeta:
		return "meta"
	case pageFreelist:
		return "freelist"
	}
	return fmt.Sprintf("unknown<%02x>", flags)
}

// readFreelist reads the freelist page and marks its pages freed (and the freelist's own
// pages reached). It reports whether a freelist was stored and could be read.
func (w *pageWalker) readFreelist(id uint64) bool {
	if id == noFreelist {
		return false
	}
	if id < 2 || id >= w.hwm {
		w.problem("page %d: freelist page out of bounds: %d", id, w.hwm)
		return false
	}
	if w.reached.has(id) {
		w.problem("page %d: multiple references (the freelist)", id)
		return false
	}
	b, err := w.read(id, w.pageSize, 0)
	if err != nil {
		w.problem("page %d: freelist page unreadable: %v", id, err)
		return false
	}
	h := parsePageHeader(b)
	switch {
	case h.id != id:
		w.problem("page %d: freelist page self identifies as page %d", id, h.id)
		return false
	case h.flags != pageFreelist:
		w.problem("page %d: invalid type: %s (want freelist)", id, pageType(h.flags))
		return false
	case uint64(h.overflow) >= w.hwm-id:
		w.problem("page %d: freelist overflow of %d pages runs past the high-water mark %d", id, h.overflow, w.hwm)
		return false
	}
	for i := uint64(0); i <= uint64(h.overflow); i++ {
		w.reach(id + i)
	}
	// A count of 0xFFFF means the real count is the first uint64 after the header.
	first, count := uint64(0), uint64(h.count)
	if h.count == 0xFFFF {
		first, count = 1, binary.LittleEndian.Uint64(b[bboltPageHeader:])
	}
	span := (uint64(h.overflow) + 1) * uint64(w.pageSize)
	if fits := (span-bboltPageHeader)/8 - first; count > fits {
		w.problem("page %d: freelist count %d does not fit in its %d page(s) (at most %d ids)", id, count, h.overflow+1, fits)
		return false
	}
	end := bboltPageHeader + (first+count)*8
	b, err = w.read(id, int(end), 0)
	if err != nil {
		w.problem("page %d: freelist page unreadable: %v", id, err)
		return false
	}
	for i := first; i < first+count; i++ {
		free := binary.LittleEndian.Uint64(b[bboltPageHeader+i*8:])
		switch {
		case free < 2 || free >= w.hwm:
			w.problem("page %d: on the freelist (page %d) but out of bounds: %d", free, id, w.hwm)
		case w.freed.has(free):
			w.problem("page %d: already freed", free)
		default:
			w.freed.add(free)
			w.pc.FreePages++
		}
	}
	return true
}

// checkBucketTree checks the B+tree of a bucket whose root is page root. keys counts its
// keys; nil means the root bucket, whose keys are the top-level buckets, counted by name.
func (w *pageWalker) checkBucketTree(root uint64, keys *int, depth int) {
	w.checkPage(root, nil, nil, keys, depth)
}

// checkPage checks page id, a branch or leaf page whose keys must lie in [lo, hi) (nil: no
// bound), and the pages below it.
func (w *pageWalker) checkPage(id uint64, lo, hi []byte, keys *int, depth int) {
	if depth >= maxPageDepth {
		w.problem("page %d: more than %d levels of pages and buckets (stack: %v)", id, maxPageDepth, w.stack)
		return
	}
	if id >= w.hwm {
		w.problem("page %d: out of bounds: %d (stack: %v)", id, w.hwm, w.stack)
		return
	}
	if w.reached.has(id) {
		w.problem("page %d: multiple references (stack: %v)", id, w.stack)
		if w.pc.loop == "" && slices.Contains(w.stack, id) {
			w.pc.loop = fmt.Sprintf("page %d: multiple references (stack: %v)", id, w.stack)
		}
		return
	}
	b, err := w.read(id, w.pageSize, depth)
	if err != nil {
		w.reach(id)
		w.problem("page %d: unreadable: %v (stack: %v)", id, err, w.stack)
		return
	}
	h := parsePageHeader(b)
	switch {
	case h.id != id:
		w.reach(id)
		w.problem("page %d: self identifies as page %d (stack: %v)", id, h.id, w.stack)
		return
	case h.flags != pageBranch && h.flags != pageLeaf:
		w.reach(id)
		w.problem("page %d: invalid type: %s (stack: %v)", id, pageType(h.flags), w.stack)
		return
	case uint64(h.overflow) >= w.hwm-id:
		w.reach(id)
		w.problem("page %d: overflow of %d pages runs past the high-water mark %d (stack: %v)", id, h.overflow, w.hwm, w.stack)
		return
	}
	if w.freed.has(id) {
		w.problem("page %d: reachable freed", id)
	}
	for i := uint64(0); i <= uint64(h.overflow); i++ {
		if i > 0 && w.reached.has(id+i) {
			w.problem("page %d: multiple references (stack: %v)", id+i, w.stack)
		}
		w.reach(id + i)
	}
	span := (int(h.overflow) + 1) * w.pageSize
	if b, err = w.readElements(id, b, h, span, depth); err != nil {
		w.problem("page %d: %v (stack: %v)", id, err, w.stack)
		return
	}
	w.stack = append(w.stack, id)
	if h.flags == pageBranch {
		w.checkBranch(id, b, h.count, lo, hi, keys, depth)
	} else {
		w.checkLeaf(id, b, h.count, lo, hi, keys, depth, nil)
	}
	w.stack = w.stack[:len(w.stack)-1]
}

// readElements checks the layout of a page's elements (layElements) and reads the page run
// (span bytes) as far as they reach.
func (w *pageWalker) readElements(id uint64, b []byte, h pageHeader, span, depth int) ([]byte, error) {
	table := bboltPageHeader + int(h.count)*pageElementBytes
	if table > len(b) && table <= span {
		var err error
		if b, err = w.read(id, table, depth); err != nil {
			return nil, fmt.Errorf("unreadable: %w", err)
		}
	}
	end, err := layElements(b, h.flags, int(h.count), span)
	if err != nil {
		return nil, err
	}
	if end > len(b) {
		if b, err = w.read(id, end, depth); err != nil {
			return nil, fmt.Errorf("unreadable: %w", err)
		}
	}
	return b, nil
}

// layElements checks that a page of span bytes holds its count elements and that each
// element's key and value lie inside it, after the previous element's, as bbolt writes them
// (node.write). It returns where the last one ends. b holds at least the element table.
func layElements(b []byte, flags uint16, count, span int) (end int, err error) {
	end = bboltPageHeader + count*pageElementBytes
	if end > span {
		return 0, fmt.Errorf("%d elements do not fit in its %d bytes", count, span)
	}
	le := binary.LittleEndian
	for i := range count {
		e := bboltPageHeader + i*pageElementBytes
		var pos, ksize, vsize uint64
		if flags == pageBranch {
			pos, ksize = uint64(le.Uint32(b[e:])), uint64(le.Uint32(b[e+4:]))
		} else {
			pos, ksize, vsize = uint64(le.Uint32(b[e+4:])), uint64(le.Uint32(b[e+8:])), uint64(le.Uint32(b[e+12:]))
		}
		switch off := uint64(e) + pos; {
		case off+ksize+vsize > uint64(span):
			return 0, fmt.Errorf("element %d (pos %d, key %d bytes, value %d bytes) lies past the end of the page (%d bytes)", i, pos, ksize, vsize, span)
		case off < uint64(end):
			return 0, fmt.Errorf("element %d (pos %d) overlaps the element table or the element before it", i, pos)
		default:
			end = int(off + ksize + vsize)
		}
	}
	return end, nil
}

// checkBranch checks a branch page's keys and the pages they point at.
func (w *pageWalker) checkBranch(id uint64, b []byte, count uint16, lo, hi []byte, keys *int, depth int) {
	if count == 0 {
		w.problem("page %d: branch page has no elements (stack: %v)", id, w.stack)
		return
	}
	le := binary.LittleEndian
	key := func(i int) []byte {
		e := bboltPageHeader + i*pageElementBytes
		pos := e + int(le.Uint32(b[e:]))
		return b[pos : pos+int(le.Uint32(b[e+4:]))]
	}
	prev, ordered := lo, true
	for i := range int(count) {
		k := key(i)
		ordered = ordered && w.checkKeyOrder(id, "branch", i, k, prev, hi)
		next := hi
		if i+1 < int(count) {
			next = key(i + 1)
		}
		prev = k
		if w.edge && i+1 < int(count) {
			continue // Cursor.Last follows the last element only
		}
		child := le.Uint64(b[bboltPageHeader+i*pageElementBytes+8:])
		w.checkPage(child, k, next, keys, depth+1)
	}
}

// checkLeaf checks a leaf page's keys, counts them, and follows the buckets among them. For
// the page of an inline bucket, inline is the bucket's name: bbolt inlines no bucket that
// holds buckets, and following one would revisit the same bytes without end.
func (w *pageWalker) checkLeaf(id uint64, b []byte, count uint16, lo, hi []byte, keys *int, depth int, inline []byte) {
	le := binary.LittleEndian
	prev, ordered := lo, true
	for i := range int(count) {
		e := bboltPageHeader + i*pageElementBytes
		pos := e + int(le.Uint32(b[e+4:]))
		ksize, vsize := int(le.Uint32(b[e+8:])), int(le.Uint32(b[e+12:]))
		k, v := b[pos:pos+ksize], b[pos+ksize:pos+ksize+vsize]
		ordered = ordered && w.checkKeyOrder(id, "leaf", i, k, prev, hi)
		prev = k
		if keys != nil {
			*keys++
		}
		if le.Uint32(b[e:])&leafBucketFlag == 0 {
			continue
		}
		if inline != nil {
			w.problem("page %d: inline bucket (hex)%s holds bucket (hex)%s, which bbolt never writes (stack: %v)", id, keyString(inline), keyString(k), w.stack)
			continue
		}
		if keys == nil && w.shallow {
			if !shallowWholeBuckets[string(k)] && !shallowEdgeBuckets[string(k)] {
				continue
			}
			w.edge = shallowEdgeBuckets[string(k)]
		}
		n := 0
		w.checkBucket(id, k, v, &n, depth+1)
		w.edge = false
		if keys != nil {
			*keys += n
		} else {
			w.pc.BucketKeys[string(k)] += n
		}
	}
}

// checkBucket checks a bucket stored as value v under key k on page id: a 16-byte header
// whose root is its root page, or 0 for an inline bucket whose leaf page follows the header.
func (w *pageWalker) checkBucket(id uint64, k, v []byte, keys *int, depth int) {
	if len(v) < bucketHeaderBytes {
		w.problem("page %d: bucket (hex)%s: value of %d bytes is shorter than a bucket header (stack: %v)", id, keyString(k), len(v), w.stack)
		return
	}
	if root := binary.LittleEndian.Uint64(v); root != 0 {
		w.checkBucketTree(root, keys, depth)
		return
	}
	w.checkInline(id, k, v[bucketHeaderBytes:], keys, depth)
}

// checkInline checks the leaf page of an inline bucket, held in its parent's value.
func (w *pageWalker) checkInline(id uint64, k, p []byte, keys *int, depth int) {
	if depth >= maxPageDepth {
		w.problem("page %d: more than %d levels of pages and buckets (stack: %v)", id, maxPageDepth, w.stack)
		return
	}
	if len(p) < bboltPageHeader {
		w.problem("page %d: inline bucket (hex)%s: %d bytes, shorter than a page header (stack: %v)", id, keyString(k), len(p), w.stack)
		return
	}
	h := parsePageHeader(p)
	if h.flags != pageLeaf {
		w.problem("page %d: inline bucket (hex)%s: invalid type: %s (stack: %v)", id, keyString(k), pageType(h.flags), w.stack)
		return
	}
	if _, err := layElements(p, h.flags, int(h.count), len(p)); err != nil {
		w.problem("page %d: inline bucket (hex)%s: %v (stack: %v)", id, keyString(k), err, w.stack)
		return
	}
	// The inline page sits on page id; the stack already names it.
	w.checkLeaf(id, p, h.count, nil, nil, keys, depth, k)
}

// checkKeyOrder is bbolt's verifyKeyOrder: key i of a page must follow the previous key (for
// the first key, the bound its parent sets) and stay below the parent's next key. It reports
// whether the key is in order; the callers report one key out of order per page, where bbolt
// reports every key, so that one misplaced page does not fill the list.
func (w *pageWalker) checkKeyOrder(id uint64, kind string, i int, key, prev, hi []byte) bool {
	before := w.pc.ErrorCount
	if i == 0 && prev != nil && bytes.Compare(prev, key) > 0 {
		w.problem("the first key[%d]=(hex)%s on %s page(%d) needs to be >= the key in the ancestor (%s). Stack: %v",
			i, keyString(key), kind, id, keyString(prev), w.stack)
	}
	if i > 0 {
		switch bytes.Compare(prev, key) {
		case 1:
			w.problem("key[%d]=(hex)%s on %s page(%d) needs to be > (found <) than previous element (hex)%s. Stack: %v",
				i, keyString(key), kind, id, keyString(prev), w.stack)
		case 0:
			w.problem("key[%d]=(hex)%s on %s page(%d) needs to be > (found =) than previous element (hex)%s. Stack: %v",
				i, keyString(key), kind, id, keyString(prev), w.stack)
		}
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		w.problem("key[%d]=(hex)%s on %s page(%d) needs to be < than key of the next element in ancestor (hex)%s. Pages stack: %v",
			i, keyString(key), kind, id, keyString(hi), w.stack)
	}
	return w.pc.ErrorCount == before
}

// keyString is a key in hex, cut short: a damaged page's key may be megabytes long.
func keyString(k []byte) string {
	if len(k) > maxKeyInError {
		return hex.EncodeToString(k[:maxKeyInError]) + fmt.Sprintf("...(%d bytes)", len(k))
	}
	return hex.EncodeToString(k)
}
