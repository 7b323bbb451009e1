package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// copyChunk is how much one copy_file_range call is asked for: the checksum of one chunk is
// computed while the next is copied.
const copyChunk = 8 << 20

// copyInKernel copies in to out, both at offset 0 and out opened for reading too, with
// copy_file_range: the bytes go from page cache to page cache (or share the source's blocks, on
// a filesystem that clones them, as cp does by default) without a pass through this process.
// Another goroutine reads each chunk back from the copy once it is written and hashes it: the
// checksum is of the copy's own bytes. On two CPUs with the page cache full, a 1 GiB db took
// 0.69 to 0.89 s, against 0.98 to 1.69 s through a buffer. handled is false when the kernel cannot copy
// between these files (before any byte was copied): the caller copies through a buffer.
func copyInKernel(out, in *os.File) (sum string, n int64, handled bool, err error) {
	type chunk struct{ off, n int64 }
	written := make(chan chunk, copyDepth)
	h := sha256.New()
	var readErr error
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		b := getBuffer()
		defer putBuffer(b)
		for c := range written {
			for done := int64(0); readErr == nil && done < c.n; {
				k, err := out.ReadAt(b[:min(c.n-done, int64(len(b)))], c.off+done)
				h.Write(b[:k])
				done += int64(k)
				if err != nil {
					readErr = err // a chunk shorter than copied: EOF too is an error here
				}
			}
		}
	}()
	src, dst := int(in.Fd()), int(out.Fd())
	for {
		k, cerr := unix.CopyFileRange(src, nil, dst, nil, copyChunk, 0)
		if errors.Is(cerr, unix.EINTR) {
			continue
		}
		if cerr != nil {
			if n == 0 && kernelCannotCopy(cerr) {
				close(written)
				<-hashed
				return "", 0, false, nil
			}
			err = cerr
			break
		}
		if k == 0 {
			// The end of in, or (before Linux 5.19, on some filesystems) a copy that did
			// nothing and said so by copying nothing.
			if st, serr := in.Stat(); n == 0 && serr == nil && st.Size() > 0 {
				close(written)
				<-hashed
				return "", 0, false, nil
			}
			break
		}
		written <- chunk{n, int64(k)}
		n += int64(k)
	}
	close(written)
	<-hashed
	if err == nil {
		err = readErr
	}
	if err != nil {
		return "", 0, true, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, true, nil
}

// kernelCannotCopy: copy_file_range's errors when these two files cannot be copied in the
// kernel at all (no byte copied): not on this kernel, across filesystems, or not on this one
// (as Go's own os.File.ReadFrom reads them).
func kernelCannotCopy(err error) bool {
	for _, e := range []error{unix.ENOSYS, unix.EXDEV, unix.EINVAL, unix.EIO, unix.EOPNOTSUPP, unix.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
