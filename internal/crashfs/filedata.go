package crashfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

const (
	// pageSize is the unit the undo log saves, and a torn write keeps, like a disk's pages.
	pageSize = 4096
	// maxTearableWrite bounds how many contiguous writes to one file merge into the one a
	// tear cuts: FUSE splits a large write(2) into 128 KiB requests.
	maxTearableWrite = 8 << 20
)

// fileState is what a cut must undo in one file (one inode): every change since its last sync.
type fileState struct {
	// undo is the inode opened read-write for the undo log: it reaches the inode whatever its
	// names are now, and keeps its number from being reused.
	undo *os.File
	// syncedSize is the size at the last sync.
	syncedSize int64
	// oldPages holds, by page index, each page's content at the last sync (up to syncedSize),
	// saved before its first change since.
	oldPages map[int64][]byte
	// unsyncedBytes counts bytes written, truncated or grown since the last sync.
	unsyncedBytes int64
	// last is the newest write, the one a tear keeps part of.
	last *lastWrite
}

// lastWrite is a copy of the newest write to a file (contiguous writes merged).
type lastWrite struct {
	seq  uint64
	off  int64
	data []byte
}

// dirtyState returns the undo state of n's inode, starting one (the inode is synced as it is
// now) at its first change since a sync. It returns nil for a file that is not regular. h, a
// handle of n or nil, is the way to the inode when n has no name left.
func (f *FS) dirtyState(n *node, h fs.FileHandle) (*fileState, error) {
	if s, ok := f.files[n.ino()]; ok {
		return s, nil
	}
	var file *os.File
	var err error
	if fh, ok := h.(*fileHandle); ok {
		file, err = os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fh.fd()), os.O_RDWR, 0)
	} else {
		file, err = os.OpenFile(n.backingPath(), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open inode %d for its undo log: %w", n.ino(), err)
	}
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		file.Close()
		return nil, err
	}
	s := &fileState{undo: file, syncedSize: fi.Size(), oldPages: map[int64][]byte{}}
	f.files[n.ino()] = s
	return s, nil
}

// write writes data at off through h, saving first what it overwrites. Callers hold mu.
func (f *FS) write(ctx context.Context, h *fileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if h.syncEach {
		written, errno := h.LoopbackFile.Write(ctx, data, off)
		f.syncData(h.node.ino())
		return written, errno
	}
	s, err := f.dirtyState(h.node, h)
	if err != nil {
		return 0, errnoOf(err)
	}
	if s == nil {
		return h.LoopbackFile.Write(ctx, data, off)
	}
	if err := s.preserve(off, off+int64(len(data))); err != nil {
		return 0, errnoOf(err)
	}
	written, errno := h.LoopbackFile.Write(ctx, data, off)
	if written > 0 {
		s.wrote(f.nextSeq(), off, data[:written])
	}
	return written, errno
}

// preserveForTruncate saves what truncating n to size destroys. Callers hold mu.
func (f *FS) preserveForTruncate(n *node, h fs.FileHandle, size int64) syscall.Errno {
	s, err := f.dirtyState(n, h)
	if err != nil || s == nil {
		return errnoOf(err)
	}
	current, err := s.size()
	if err != nil {
		return errnoOf(err)
	}
	if err := s.preserve(size, s.syncedSize); err != nil {
		return errnoOf(err)
	}
	s.unsyncedBytes += abs(current - size)
	return 0
}

// allocate runs fallocate through h, saving first what a hole punch, zeroed range or range
// shift destroys. Callers hold mu.
func (f *FS) allocate(ctx context.Context, h *fileHandle, off, length int64, mode uint32) syscall.Errno {
	if h.syncEach {
		errno := h.LoopbackFile.Allocate(ctx, uint64(off), uint64(length), mode)
		f.syncData(h.node.ino())
		return errno
	}
	s, err := f.dirtyState(h.node, h)
	if err != nil {
		return errnoOf(err)
	}
	if s == nil {
		return h.LoopbackFile.Allocate(ctx, uint64(off), uint64(length), mode)
	}
	before, err := s.size()
	if err != nil {
		return errnoOf(err)
	}
	switch {
	case mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0:
		err = s.preserve(off, s.syncedSize) // everything after off moves
	case mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0:
		err = s.preserve(off, off+length)
		s.unsyncedBytes += length
	}
	if err != nil {
		return errnoOf(err)
	}
	errno := h.LoopbackFile.Allocate(ctx, uint64(off), uint64(length), mode)
	if after, err := s.size(); err == nil {
		s.unsyncedBytes += abs(after - before)
	}
	return errno
}

// syncData makes the data of inode ino durable: its undo log goes. Callers hold mu.
func (f *FS) syncData(ino uint64) {
	if s, ok := f.files[ino]; ok {
		s.close()
		delete(f.files, ino)
	}
}

// preserve saves the synced content of every page in [off, end) not saved yet.
func (s *fileState) preserve(off, end int64) error {
	end = min(end, s.syncedSize)
	for page := off / pageSize; page*pageSize < end; page++ { // bounded by the file's size
		if _, saved := s.oldPages[page]; saved {
			continue
		}
		start := page * pageSize
		old := make([]byte, min(pageSize, s.syncedSize-start))
		n, err := s.undo.ReadAt(old, start)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("save page %d for the undo log: %w", page, err)
		}
		s.oldPages[page] = old[:n]
	}
	return nil
}

// wrote records a write as the newest one, merged with the previous one if it continues it.
func (s *fileState) wrote(seq uint64, off int64, data []byte) {
	s.unsyncedBytes += int64(len(data))
	if w := s.last; w != nil && w.off+int64(len(w.data)) == off && len(w.data)+len(data) <= maxTearableWrite {
		w.data = append(w.data, data...)
		w.seq = seq
		return
	}
	s.last = &lastWrite{seq: seq, off: off, data: bytes.Clone(data)}
}

func (s *fileState) size() (int64, error) {
	fi, err := s.undo.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// revert puts the file back to its synced size and content.
func (s *fileState) revert() error {
	if err := s.undo.Truncate(s.syncedSize); err != nil {
		return fmt.Errorf("restore size %d: %w", s.syncedSize, err)
	}
	var errs []error
	for page, old := range s.oldPages {
		if _, err := s.undo.WriteAt(old, page*pageSize); err != nil {
			errs = append(errs, fmt.Errorf("restore page %d: %w", page, err))
		}
	}
	return errors.Join(errs...)
}

// tear writes back the first pages of the newest write (after revert): pages counts from
// the page its offset falls in. It returns how many bytes it kept.
func (s *fileState) tear(pages int) (int, error) {
	w := s.last
	keepEnd := min(w.off+int64(len(w.data)), (w.off/pageSize+int64(pages))*pageSize)
	kept := int(max(keepEnd-w.off, 0))
	if kept == 0 {
		return 0, nil
	}
	if _, err := s.undo.WriteAt(w.data[:kept], w.off); err != nil {
		return 0, fmt.Errorf("keep %d bytes of the torn write: %w", kept, err)
	}
	return kept, nil
}

// pagesSpanned is how many pages the newest write touches.
func (w *lastWrite) pagesSpanned() int {
	if len(w.data) == 0 {
		return 0
	}
	return int((w.off+int64(len(w.data))-1)/pageSize - w.off/pageSize + 1)
}

func (s *fileState) close() { s.undo.Close() }

// errnoOf turns an error from the backing dir into what FUSE answers.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
