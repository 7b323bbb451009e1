package crashfs

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// drainTimeout bounds Cut's wait for the operations in flight; each is a few syscalls on
	// the backing dir.
	drainTimeout = 30 * time.Second
	// serverExitTimeout bounds the wait for the FUSE server to stop after the unmount.
	serverExitTimeout = 10 * time.Second
)

// CutOptions says how the power goes off.
type CutOptions struct {
	// Tear keeps a prefix of the newest unsynced write, whole 4 KiB pages of the file, instead
	// of dropping all of it: a torn multi-page write (etcd #16596, a torn 16 KiB write to
	// member/snap/db).
	Tear bool
	// TearPath tears the newest write to this file (relative to the mount, or absolute under
	// it) instead of the newest write of all.
	TearPath string
	// TearPages is how many pages of the write survive, at most all but one; 0 lets Rand
	// choose.
	TearPages int
	// Rand chooses the pages that survive when TearPages is 0; nil keeps one page.
	Rand *rand.Rand
}

// CutReport says what a cut dropped.
type CutReport struct {
	// Files are the files whose unsynced data was dropped, by their path when the power went.
	Files []DroppedFile `json:"files,omitempty"`
	// BytesDropped counts the bytes written, truncated or grown since the files' last syncs,
	// less what a tear kept.
	BytesDropped int64 `json:"bytesDropped"`
	// Entries are the directory changes undone, newest first ("create member/wal/0.tmp").
	Entries []string `json:"entries,omitempty"`
	// Torn is the write a tear kept part of; nil without one.
	Torn *TornWrite `json:"torn,omitempty"`
	// Detached is set when a process still held the mount, so it was aborted and detached.
	Detached bool `json:"detached,omitempty"`
}

// DroppedFile is one file whose unsynced data a cut dropped.
type DroppedFile struct {
	// Path is relative to the mount; "(unlinked) ..." for a file that no name reached.
	Path string `json:"path"`
	// Bytes counts the bytes written, truncated or grown since its last sync.
	Bytes int64 `json:"bytes"`
}

// TornWrite is the write a cut kept part of.
type TornWrite struct {
	// Path is the file, relative to the mount.
	Path string `json:"path"`
	// Offset is where the write started in the file.
	Offset int64 `json:"offset"`
	// Kept of Of bytes survive.
	Kept int `json:"kept"`
	Of   int `json:"of"`
}

// String summarises the report in one line.
func (r *CutReport) String() string {
	s := fmt.Sprintf("power cut: dropped %d bytes of unsynced data in %d file(s), undid %d directory change(s)",
		r.BytesDropped, len(r.Files), len(r.Entries))
	if r.Torn != nil {
		s += fmt.Sprintf(", tore the write at %s:%d keeping %d of %d bytes", r.Torn.Path, r.Torn.Offset, r.Torn.Kept, r.Torn.Of)
	}
	return s
}

// Cut turns the power off: every further operation fails with EIO, the backing dir goes back
// to its synced state (a tear can keep part of the newest write), and the mount goes away,
// aborted and detached if a process still holds it. Every wait is bounded.
func (f *FS) Cut(opts CutOptions) (*CutReport, error) {
	f.life.Lock()
	defer f.life.Unlock()
	if f.closed {
		return nil, fmt.Errorf("cut %s: not mounted", f.mountpoint)
	}
	f.closed = true
	f.powerOff.Store(true)
	report := &CutReport{}
	var errs []error
	if f.drain(drainTimeout) {
		if f.afterPowerOff != nil {
			f.afterPowerOff()
		}
		errs = append(errs, f.revert(opts, report))
		f.inFlight.Unlock()
	} else {
		errs = append(errs, fmt.Errorf("cut %s: operations still in flight after %s; the backing dir %s was not reverted", f.mountpoint, drainTimeout, f.backing))
	}
	detached, err := f.forceUnmount()
	report.Detached = detached
	errs = append(errs, err, f.panicErr())
	return report, errors.Join(errs...)
}

// drain waits until no operation is in flight and holds them off; false if it timed out.
// New operations see the power off and never wait, so this ends.
func (f *FS) drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !f.inFlight.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// revert puts the backing dir back to its synced state and fills report.
func (f *FS) revert(opts CutOptions, report *CutReport) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	var named *fileState
	if opts.Tear && opts.TearPath != "" {
		var err error
		if named, err = f.stateAt(opts.TearPath); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range f.files {
		path, _ := f.pathOf(s)
		report.Files = append(report.Files, DroppedFile{Path: path, Bytes: s.unsyncedBytes})
		report.BytesDropped += s.unsyncedBytes
		if err := s.revert(); err != nil {
			errs = append(errs, fmt.Errorf("revert %s: %w", path, err))
		}
	}
	slices.SortFunc(report.Files, func(a, b DroppedFile) int { return strings.Compare(a.Path, b.Path) })
	undone, err := f.names.undoAll(f.backing)
	report.Entries = undone
	errs = append(errs, err)
	if opts.Tear {
		torn, err := f.tear(opts, named)
		report.Torn = torn
		if torn != nil {
			report.BytesDropped -= int64(torn.Kept)
		}
		errs = append(errs, err)
	}
	f.forgetUnsynced()
	errs = append(errs, os.RemoveAll(filepath.Join(f.backing, stashName)))
	return errors.Join(errs...)
}

// tear keeps part of the newest write to named, or of the newest write to a file that still
// has a name after the revert.
func (f *FS) tear(opts CutOptions, named *fileState) (*TornWrite, error) {
	target := named
	if target == nil && opts.TearPath == "" {
		candidates := slices.DeleteFunc(slices.Collect(maps.Values(f.files)), func(s *fileState) bool { return s.last == nil })
		slices.SortFunc(candidates, func(a, b *fileState) int { return cmp.Compare(b.last.seq, a.last.seq) })
		for _, s := range candidates {
			if _, linked := f.pathOf(s); linked {
				target = s
				break
			}
		}
	}
	if target == nil {
		return nil, nil
	}
	w := target.last
	kept, err := target.tear(tearPages(opts, w.pagesSpanned()))
	path, _ := f.pathOf(target)
	return &TornWrite{Path: path, Offset: w.off, Kept: kept, Of: len(w.data)}, err
}

// tearPages is how many pages of a write spanning spanned pages survive: some, never all.
func tearPages(opts CutOptions, spanned int) int {
	switch {
	case spanned < 2:
		return 0
	case opts.TearPages > 0:
		return min(opts.TearPages, spanned-1)
	case opts.Rand != nil:
		return 1 + opts.Rand.IntN(spanned-1)
	}
	return 1
}

// stateAt returns the undo state of the file at path (relative to the mount or absolute
// under it), which must have an unsynced write.
func (f *FS) stateAt(path string) (*fileState, error) {
	rel := path
	if filepath.IsAbs(path) {
		var err error
		if rel, err = filepath.Rel(f.mountpoint, path); err != nil || !within(path, f.mountpoint) {
			return nil, fmt.Errorf("tear %s: not under the mount %s", path, f.mountpoint)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(f.backing, rel), &st); err != nil {
		return nil, fmt.Errorf("tear %s: %w", path, err)
	}
	s, ok := f.files[st.Ino]
	if !ok || s.last == nil {
		return nil, fmt.Errorf("tear %s: no unsynced write to it", path)
	}
	return s, nil
}

// pathOf names the file s undoes, relative to the mount, and says whether a name reaches it.
func (f *FS) pathOf(s *fileState) (string, bool) {
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", s.undo.Fd()))
	if err != nil {
		return "(unknown)", false
	}
	deleted := strings.HasSuffix(target, " (deleted)")
	target = strings.TrimSuffix(target, " (deleted)")
	rel, err := filepath.Rel(f.backing, target)
	if err != nil {
		return target, false
	}
	if deleted || within(target, filepath.Join(f.backing, stashName)) {
		return "(unlinked) " + rel, false
	}
	return rel, true
}

// forceUnmount unmounts; if a process still holds the mount, MNT_FORCE aborts the FUSE
// connection (its requests fail, the server stops) and MNT_DETACH takes the mount away.
func (f *FS) forceUnmount() (detached bool, err error) {
	if err := unix.Unmount(f.mountpoint, 0); err != nil {
		if err := unix.Unmount(f.mountpoint, unix.MNT_FORCE); err != nil {
			if err := unix.Unmount(f.mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return false, fmt.Errorf("unmount %s: %w", f.mountpoint, err)
			}
			detached = true
		}
	}
	stopped := make(chan struct{})
	go func() {
		f.server.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return detached, nil
	case <-time.After(serverExitTimeout):
		return detached, fmt.Errorf("the FUSE server of %s still runs %s after the unmount", f.mountpoint, serverExitTimeout)
	}
}
