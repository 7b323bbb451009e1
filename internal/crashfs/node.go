package crashfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is one file or directory of the mount: go-fuse's loopback node, with every operation
// gated by the power switch and every change logged for a cut.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// newRoot returns the root node over f.backing, whose attributes are st.
func (f *FS) newRoot(st *syscall.Stat_t) *node {
	data := &fs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: data}, fsys: f}
	data.RootNode = root
	return root
}

// WrapChild makes every node go-fuse creates below the root a crashfs node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// ino is the inode number of the backing file, which keys the undo logs.
func (n *node) ino() uint64 { return n.StableAttr().Ino }

// rel is the node's path relative to the backing dir ("" for the root).
func (n *node) rel() string { return n.Path(n.Root()) }

// backingPath is the node's path in the backing dir.
func (n *node) backingPath() string { return filepath.Join(n.RootData.Path, n.rel()) }

// hides reports whether name in this directory is the stash, which the mount does not show.
func (n *node) hides(name string) bool {
	return name == stashName && n.EmbeddedInode() == n.Root()
}

// Lookup hides the stash.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var child *fs.Inode
	errno := n.fsys.do("lookup", func() (errno syscall.Errno) {
		if n.hides(name) {
			return syscall.ENOENT
		}
		child, errno = n.LoopbackNode.Lookup(ctx, name, out)
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	return child, 0
}

// Create logs the new entry and hands out a tracking handle. O_EXCL keeps it from opening a
// file that exists after all, whose removal on a cut would be wrong.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var child *fs.Inode
	var handle fs.FileHandle
	var fuseFlags uint32
	errno := n.fsys.change("create", func() (errno syscall.Errno) {
		if n.hides(name) {
			return syscall.EPERM
		}
		var lf fs.FileHandle
		child, lf, fuseFlags, errno = n.LoopbackNode.Create(ctx, name, flags|syscall.O_EXCL, mode, out)
		if errno != 0 {
			return errno
		}
		handle = n.fsys.newFileHandle(child.Operations().(*node), lf.(*fs.LoopbackFile), flags)
		n.fsys.names.add(n.fsys.created("create", n, name))
		return 0
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, handle, fuseFlags, 0
}

// Mknod logs the new entry.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.createEntry("mknod", name, func() (*fs.Inode, syscall.Errno) {
		return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	})
}

// Mkdir logs the new directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.createEntry("mkdir", name, func() (*fs.Inode, syscall.Errno) {
		return n.LoopbackNode.Mkdir(ctx, name, mode, out)
	})
}

// Symlink logs the new entry.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.createEntry("symlink", name, func() (*fs.Inode, syscall.Errno) {
		return n.LoopbackNode.Symlink(ctx, target, name, out)
	})
}

// Link logs the new entry.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.createEntry("link", name, func() (*fs.Inode, syscall.Errno) {
		return n.LoopbackNode.Link(ctx, target, name, out)
	})
}

// createEntry runs make, which adds the entry name to this directory, and logs it.
func (n *node) createEntry(op, name string, make func() (*fs.Inode, syscall.Errno)) (*fs.Inode, syscall.Errno) {
	var child *fs.Inode
	errno := n.fsys.change(op, func() (errno syscall.Errno) {
		if n.hides(name) {
			return syscall.EPERM
		}
		child, errno = make()
		if errno == 0 {
			n.fsys.names.add(n.fsys.created(op, n, name))
		}
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	return child, 0
}

// Unlink moves the entry into the stash, where a cut can find it.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.fsys.change("unlink", func() syscall.Errno {
		if n.hides(name) {
			return syscall.ENOENT
		}
		return n.fsys.remove("unlink", n, name)
	})
}

// Rmdir moves the empty directory into the stash, where a cut can find it.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fsys.change("rmdir", func() syscall.Errno {
		if n.hides(name) {
			return syscall.ENOENT
		}
		return n.fsys.remove("rmdir", n, name)
	})
}

// Rename logs the move; a target it replaces goes to the stash first.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return n.fsys.change("rename", func() syscall.Errno {
		to, ok := newParent.(*node)
		if !ok {
			return syscall.EXDEV
		}
		if n.hides(name) || to.hides(newName) {
			return syscall.EPERM
		}
		return n.fsys.rename(n, name, to, newName, flags)
	})
}

// Open hands out a tracking handle. An O_TRUNC open is tracked as a truncate to 0, though
// the kernel sends it as a separate SETATTR unless the filesystem asks otherwise.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var handle fs.FileHandle
	var fuseFlags uint32
	open := func() (errno syscall.Errno) {
		if flags&syscall.O_TRUNC != 0 {
			if errno := n.fsys.preserveForTruncate(n, nil, 0); errno != 0 {
				return errno
			}
		}
		var lf fs.FileHandle
		lf, fuseFlags, errno = n.LoopbackNode.Open(ctx, flags)
		if errno != 0 {
			return errno
		}
		handle = n.fsys.newFileHandle(n, lf.(*fs.LoopbackFile), flags)
		return 0
	}
	var errno syscall.Errno
	if flags&syscall.O_TRUNC != 0 {
		errno = n.fsys.change("open", open)
	} else {
		errno = n.fsys.do("open", open)
	}
	if errno != 0 {
		return nil, 0, errno
	}
	return handle, fuseFlags, 0
}

// Tmpfile hands out a tracking handle for an unnamed file (O_TMPFILE).
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var child *fs.Inode
	var handle fs.FileHandle
	var fuseFlags uint32
	errno := n.fsys.do("tmpfile", func() (errno syscall.Errno) {
		var lf fs.FileHandle
		child, lf, fuseFlags, errno = n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
		if errno != 0 {
			return errno
		}
		handle = n.fsys.newFileHandle(child.Operations().(*node), lf.(*fs.LoopbackFile), flags)
		return 0
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, handle, fuseFlags, 0
}

// OpendirHandle wraps go-fuse's directory stream: it hides the stash, and its Fsyncdir is a
// directory sync (go-fuse's own stream would fsync the backing dir and nothing else).
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var handle fs.FileHandle
	var fuseFlags uint32
	errno := n.fsys.do("opendir", func() (errno syscall.Errno) {
		var stream fs.FileHandle
		stream, fuseFlags, errno = n.LoopbackNode.OpendirHandle(ctx, flags)
		if errno == 0 {
			handle = &dirHandle{stream: stream, node: n}
		}
		return errno
	})
	if errno != 0 {
		return nil, 0, errno
	}
	return handle, fuseFlags, 0
}

// Fsync syncs a file's data, or a directory's entries (FUSE sends FSYNC for files and
// FSYNCDIR for directories; both come here).
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return n.fsys.change("fsync", func() syscall.Errno {
		if n.IsDir() {
			n.fsys.names.syncDir(n.ino(), n.fsys.backing)
		} else {
			n.fsys.syncData(n.ino())
		}
		return 0
	})
}

// Setattr tracks a size change (truncate); the rest passes through.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	size, ok := in.GetSize()
	if !ok {
		return n.fsys.do("setattr", func() syscall.Errno {
			return n.LoopbackNode.Setattr(ctx, f, in, out)
		})
	}
	return n.fsys.change("truncate", func() syscall.Errno {
		if errno := n.fsys.preserveForTruncate(n, f, int64(size)); errno != 0 {
			return errno
		}
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	})
}

// CopyFileRange is refused, so the kernel copies with reads and writes, which are tracked.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut, length, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// The remaining operations change nothing tracked; they only obey the power switch.

// Getattr obeys the power switch.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.fsys.do("getattr", func() syscall.Errno { return n.LoopbackNode.Getattr(ctx, f, out) })
}

// Statx obeys the power switch.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return n.fsys.do("statx", func() syscall.Errno { return n.LoopbackNode.Statx(ctx, f, flags, mask, out) })
}

// Statfs obeys the power switch.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return n.fsys.do("statfs", func() syscall.Errno { return n.LoopbackNode.Statfs(ctx, out) })
}

// Readlink obeys the power switch.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	var target []byte
	errno := n.fsys.do("readlink", func() (errno syscall.Errno) {
		target, errno = n.LoopbackNode.Readlink(ctx)
		return errno
	})
	return target, errno
}

// Getxattr obeys the power switch.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var size uint32
	errno := n.fsys.do("getxattr", func() (errno syscall.Errno) {
		size, errno = n.LoopbackNode.Getxattr(ctx, attr, dest)
		return errno
	})
	return size, errno
}

// Listxattr obeys the power switch.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var size uint32
	errno := n.fsys.do("listxattr", func() (errno syscall.Errno) {
		size, errno = n.LoopbackNode.Listxattr(ctx, dest)
		return errno
	})
	return size, errno
}

// Setxattr obeys the power switch; extended attributes are not tracked.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.fsys.do("setxattr", func() syscall.Errno { return n.LoopbackNode.Setxattr(ctx, attr, data, flags) })
}

// Removexattr obeys the power switch; extended attributes are not tracked.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.fsys.do("removexattr", func() syscall.Errno { return n.LoopbackNode.Removexattr(ctx, attr) })
}
