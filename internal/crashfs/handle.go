package crashfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileHandle is an open file of the mount: go-fuse's loopback file, with writes logged for a
// cut. The node's Getattr, Setattr and Fsync reach it only through the node, which gates them.
type fileHandle struct {
	*fs.LoopbackFile
	node *node
	// syncEach is set for O_SYNC and O_DSYNC: every write is durable when it returns.
	syncEach bool
}

var (
	_ fs.FileWriter          = (*fileHandle)(nil)
	_ fs.FileWritever        = (*fileHandle)(nil)
	_ fs.FileAllocater       = (*fileHandle)(nil)
	_ fs.FilePassthroughFder = (*fileHandle)(nil)
)

func (f *FS) newFileHandle(n *node, lf *fs.LoopbackFile, flags uint32) *fileHandle {
	return &fileHandle{LoopbackFile: lf, node: n, syncEach: flags&syscall.O_DSYNC != 0}
}

// fd is the handle's descriptor of the backing file.
func (h *fileHandle) fd() int {
	fd, _ := h.LoopbackFile.PassthroughFd()
	return fd
}

// PassthroughFd refuses FUSE passthrough: with it the kernel would write the backing file
// itself, past the undo log.
func (h *fileHandle) PassthroughFd() (int, bool) { return 0, false }

// Write saves what it overwrites first.
func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	var written uint32
	errno := h.node.fsys.change("write", func() (errno syscall.Errno) {
		written, errno = h.node.fsys.write(ctx, h, data, off)
		return errno
	})
	if errno != 0 {
		return 0, errno
	}
	return written, 0
}

// Writev is Write of the buffers joined.
func (h *fileHandle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var size int
	for _, b := range data {
		size += len(b)
	}
	joined := make([]byte, 0, size)
	for _, b := range data {
		joined = append(joined, b...)
	}
	return h.Write(ctx, joined, off)
}

// Allocate saves what a hole punch or range shift destroys first.
func (h *fileHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.node.fsys.change("fallocate", func() syscall.Errno {
		return h.node.fsys.allocate(ctx, h, int64(off), int64(size), mode)
	})
}

// Read obeys the power switch.
func (h *fileHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var res fuse.ReadResult
	errno := h.node.fsys.do("read", func() (errno syscall.Errno) {
		res, errno = h.LoopbackFile.Read(ctx, buf, off)
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	return res, 0
}

// Flush obeys the power switch.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	return h.node.fsys.do("flush", func() syscall.Errno { return h.LoopbackFile.Flush(ctx) })
}

// Lseek obeys the power switch.
func (h *fileHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	var pos uint64
	errno := h.node.fsys.do("lseek", func() (errno syscall.Errno) {
		pos, errno = h.LoopbackFile.Lseek(ctx, off, whence)
		return errno
	})
	return pos, errno
}

// Ioctl is refused: an ioctl can change data (FICLONE, ...) past the undo log.
func (h *fileHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	return 0, syscall.ENOTTY
}

// dirHandle is an open directory of the mount: go-fuse's loopback directory stream, which
// hides the stash and routes FSYNCDIR to the directory log.
type dirHandle struct {
	stream fs.FileHandle
	node   *node
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

// Readdirent returns the next entry but the stash.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	var entry *fuse.DirEntry
	errno := d.node.fsys.do("readdir", func() (errno syscall.Errno) {
		stream, ok := d.stream.(fs.FileReaddirenter)
		if !ok {
			return syscall.ENOTSUP
		}
		entry, errno = stream.Readdirent(ctx)
		if errno == 0 && entry != nil && d.node.hides(entry.Name) {
			entry, errno = stream.Readdirent(ctx) // the stash is a single entry
		}
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	return entry, 0
}

// Seekdir obeys the power switch.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.node.fsys.do("seekdir", func() syscall.Errno {
		if stream, ok := d.stream.(fs.FileSeekdirer); ok {
			return stream.Seekdir(ctx, off)
		}
		return syscall.ENOTSUP
	})
}

// Releasedir closes the stream, power or not.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if stream, ok := d.stream.(fs.FileReleasedirer); ok {
		stream.Releasedir(ctx, flags)
	}
}

// Fsyncdir makes the directory's changes durable.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.node.Fsync(ctx, d, flags)
}
