package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A tear keeps whole pages from the start of the newest unsynced write and drops the rest:
// etcd #16596's torn 16 KiB write to member/snap/db.
func TestTornWriteKeepsAPageAlignedPrefix(t *testing.T) {
	for _, tc := range []struct {
		name      string
		off       int64
		opts      CutOptions
		wantKept  int
		wantPages []int // with Rand: any of these page counts
	}{
		{name: "two of four pages", opts: CutOptions{Tear: true, TearPages: 2}, wantKept: 2 * pageSize},
		{name: "never the whole write", opts: CutOptions{Tear: true, TearPages: 9}, wantKept: 3 * pageSize},
		{name: "unaligned write keeps up to a page boundary", off: 1000, opts: CutOptions{Tear: true, TearPages: 1}, wantKept: pageSize - 1000},
		{name: "pages chosen at random", opts: CutOptions{Tear: true, Rand: rand.New(rand.NewPCG(1, 2))}, wantPages: []int{1, 2, 3}},
		{name: "named file", opts: CutOptions{Tear: true, TearPath: "db", TearPages: 1}, wantKept: pageSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mnt, backing := mountForTest(t)
			path := filepath.Join(mnt, "db")
			old := strings.Repeat("o", 6*pageSize)
			writeSynced(t, path, old)
			fsync(t, mnt)
			file, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			torn := bytes.Repeat([]byte("t"), 4*pageSize)
			if _, err := file.WriteAt(torn, tc.off); err != nil {
				t.Fatal(err)
			}
			file.Close()

			report := cutAndRemount(t, f, backing, mnt, tc.opts)
			if report.Torn == nil {
				t.Fatal("report names no torn write")
			}
			kept := report.Torn.Kept
			if tc.wantPages != nil {
				if kept%pageSize != 0 || kept < pageSize || kept > 3*pageSize {
					t.Errorf("kept %d bytes, want 1 to 3 whole pages", kept)
				}
			} else if kept != tc.wantKept {
				t.Errorf("kept %d bytes, want %d", kept, tc.wantKept)
			}
			want := old[:tc.off] + string(torn[:kept]) + old[tc.off+int64(kept):]
			wantContent(t, path, want)
			if report.Torn.Path != "db" || report.Torn.Of != len(torn) || report.Torn.Offset != tc.off {
				t.Errorf("torn write = %+v, want db at %d, of %d bytes", report.Torn, tc.off, len(torn))
			}
			if report.BytesDropped != int64(len(torn)-kept) {
				t.Errorf("bytes dropped = %d, want %d", report.BytesDropped, len(torn)-kept)
			}
		})
	}
}

// A tear picks the newest write of all, and a file appended past its synced size keeps the
// torn prefix as its new end.
func TestTearPicksTheNewestWrite(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	for _, name := range []string{"older", "newer"} {
		writeSynced(t, filepath.Join(mnt, name), "synced;")
	}
	fsync(t, mnt)
	for _, name := range []string{"older", "newer"} {
		file, err := os.OpenFile(filepath.Join(mnt, name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write(bytes.Repeat([]byte("a"), 3*pageSize)); err != nil {
			t.Fatal(err)
		}
		file.Close()
	}
	report := cutAndRemount(t, f, backing, mnt, CutOptions{Tear: true, TearPages: 1})
	wantContent(t, filepath.Join(mnt, "older"), "synced;")
	wantContent(t, filepath.Join(mnt, "newer"), "synced;"+strings.Repeat("a", pageSize-len("synced;")))
	if report.Torn == nil || report.Torn.Path != "newer" {
		t.Errorf("torn write = %+v, want the one to newer", report.Torn)
	}
}

// A write that arrives once the cut has started fails with EIO and changes nothing.
func TestWriteDuringTheCutFailsWithEIOAndChangesNothing(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	path := filepath.Join(mnt, "data")
	writeSynced(t, path, "synced")
	fsync(t, mnt)
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var writeErr, syncErr error
	f.afterPowerOff = func() {
		_, writeErr = file.WriteAt([]byte("too late"), 0)
		syncErr = file.Sync()
	}
	report := cutAndRemount(t, f, backing, mnt, CutOptions{})
	if !errors.Is(writeErr, syscall.EIO) || !errors.Is(syncErr, syscall.EIO) {
		t.Errorf("write and fsync during the cut: %v, %v; want EIO", writeErr, syncErr)
	}
	if _, err := file.WriteAt([]byte("after"), 0); err == nil {
		t.Error("write after the cut through a handle opened before it succeeded")
	}
	if !report.Detached {
		t.Error("report says the mount was not detached, though this test held a file open on it")
	}
	wantContent(t, path, "synced")
}

// Writers that hammer the mount while the power goes off leave exactly what their last
// successful fsyncs covered: operations in flight finish before the revert, later ones fail.
func TestCutDuringWritesLeavesWhatTheFsyncsCovered(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	const writers = 4
	durable := make([]int, writers)   // bytes each writer's last successful fsync covered
	attempted := make([]int, writers) // bytes the fsync that failed would have covered: the cut may
	// have made it durable and then lost its answer
	var wg sync.WaitGroup
	var firstFsyncs sync.WaitGroup // each writer's first fsync done: the cut comes after them
	firstFsyncs.Add(writers)
	for w := range writers {
		path := filepath.Join(mnt, fmt.Sprintf("w%d", w))
		writeSynced(t, path, "")
		fsync(t, mnt)
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		wg.Go(func() {
			var first sync.Once
			defer first.Do(firstFsyncs.Done) // a writer that failed first does not hold the cut
			block := bytes.Repeat([]byte{byte('a' + w)}, 1000)
			for i := range 100_000 { // until the cut fails a write; bounded regardless
				if _, err := file.WriteAt(block, int64(i*len(block))); err != nil {
					return
				}
				if i%7 == 0 {
					attempted[w] = (i + 1) * len(block)
					if err := file.Sync(); err != nil {
						return
					}
					durable[w] = (i + 1) * len(block)
					first.Do(firstFsyncs.Done)
				}
			}
		})
	}
	// Every writer under way (a loaded machine can take longer than the 300 ms that follow to
	// start four of them), then 300 ms of writes to cut into.
	synced := make(chan struct{})
	go func() { firstFsyncs.Wait(); close(synced) }()
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(300 * time.Millisecond)
	report := cutAndRemount(t, f, backing, mnt, CutOptions{})
	wg.Wait()
	for w := range writers {
		got := contentOf(t, filepath.Join(mnt, fmt.Sprintf("w%d", w)))
		pattern := strings.Repeat(string(rune('a'+w)), len(got))
		if got != pattern || (len(got) != durable[w] && len(got) != attempted[w]) {
			t.Errorf("writer %d's file after the cut: %d bytes (pattern intact: %v), want %d (its last fsync) or %d (the fsync the cut interrupted)",
				w, len(got), got == pattern, durable[w], attempted[w])
		}
		if durable[w] == 0 {
			t.Errorf("writer %d never completed an fsync before the cut", w)
		}
	}
	if report.BytesDropped == 0 {
		t.Log("the cut found nothing unsynced: every writer had just fsynced")
	}
}
