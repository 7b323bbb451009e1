// Package crashfs is a FUSE passthrough filesystem that can lose power: Cut drops every write
// that was not made durable, the way a power cut drops what the page cache held. Killing a
// process keeps the page cache; this is the fault that kill cannot model.
//
// The model is LazyFS's and ALICE's:
//   - Reads always see every write (the page cache). Writes go straight to the backing dir.
//   - A file's data (write, truncate, fallocate) is unsynced until fsync or fdatasync on any
//     handle of that inode; a file opened O_SYNC or O_DSYNC syncs itself on every write.
//     Before the first unsynced change to a 4 KiB page the old page is saved, with the synced
//     size; a sync drops what was saved. Tracking is per inode, so a rename loses nothing.
//   - A directory change (create, mknod, mkdir, symlink, link, unlink, rmdir, rename) is
//     unsynced until a directory fsync. The directory changes form one ordered log, as a
//     journaling filesystem's metadata does: fsync of a directory makes its own changes
//     durable together with every change made before its newest one (what xfs does when it
//     forces its log up to the directory's last change; ext4 commits even more). A file's
//     own fsync makes none of them durable: a new file needs its parent directory fsynced.
//     etcd relies on that order: it never fsyncs the data dir after creating member/, nor
//     member/wal after creating the first WAL segment in it.
//   - Removed entries (unlink, rmdir, the target a rename replaces) wait in the hidden
//     directory .crashfs-stash of the backing dir until their removal is durable, so a cut
//     can put them back.
//
// Cut makes every further operation fail with EIO, waits for the ones in flight, reverts the
// backing dir to its synced state (data first, then directory changes newest first), can keep
// a page-aligned prefix of the newest write (a torn write), and unmounts, forcibly if a
// process still holds the mount. Mount the same backing dir again to see what survived.
//
// Mount needs /dev/fuse and root; without them it returns an error wrapping ErrUnavailable.
//
// A process must not mmap files on a mount it serves itself (bbolt does): a page fault on a
// FUSE mapping blocks its thread outside any Go safe point, a garbage collection then stops
// the goroutines that would answer it, and the process deadlocks. Start serves the mount from
// a child process that calls Serve; the Process it returns, like an FS, is a Disk.
package crashfs
