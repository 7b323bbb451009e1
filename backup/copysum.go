package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// CopyTreeSummed copies every regular file under src into dst (skipping the top-level entries
// skip names), reading each file once: the checksum is of the very bytes written. workers
// files are copied at a time. Each copy is fsynced, and so is every folder created. The copies
// are private (files 0600, folders 0700), whatever the source's mode bits. src must
// not change meanwhile (a stopped member). Links are followed (see walkFollowing): the copy
// holds the files behind them as plain files and folders; Links lists the links themselves.
func CopyTreeSummed(src, dst string, skip map[string]bool, workers int) ([]FileSum, int64, error) {
	files, total, err := CopyTreeLinking(src, dst, skip, workers, nil)
	if err == nil {
		err = SyncTree(dst)
	}
	if err != nil {
		return nil, 0, err
	}
	return files, total, nil
}

// CopyTreeLinking is CopyTreeSummed, except that nothing is fsynced yet (SyncTree does that, and
// can run beside VerifyAgainstSource: both only wait on the disk and the page cache), and that
// the files named in sealed (relative to src), files their writer never changes in place, are
// hard-linked into dst when they are on the same filesystem and readable by their owner only:
// the link keeps them when the source is removed or renamed, and costs no copy. Each is summed
// from the file itself and marked Linked, and VerifyAgainstSource checks it is still the same
// file. Elsewhere they are copied.
func CopyTreeLinking(src, dst string, skip map[string]bool, workers int, sealed map[string]bool) ([]FileSum, int64, error) {
	type job struct {
		rel   string
		mode  fs.FileMode
		size  int64
		mtime time.Time
	}
	var jobs []job
	folders := []string{dst}
	err := walkFollowing(src, skip, func(rel string, info fs.FileInfo) error {
		switch {
		case info.IsDir():
			folders = append(folders, filepath.Join(dst, rel))
		case info.Mode().IsRegular():
			jobs = append(jobs, job{rel, info.Mode(), info.Size(), info.ModTime().UTC()})
		}
		return nil
	}, nil)
	if err != nil {
		return nil, 0, err
	}
	for _, d := range folders {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, 0, err
		}
	}
	// Largest first, so that the workers finish together.
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].size > jobs[b].size })
	out := make([]FileSum, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				from, to := filepath.Join(src, j.rel), filepath.Join(dst, j.rel)
				if sealed[j.rel] && j.mode.Perm()&0o077 == 0 && os.Link(from, to) == nil {
					sum, err := FileSHA256(to)
					out[i], errs[i] = FileSum{Path: j.rel, Size: j.size, Mode: j.mode, SHA256: sum, ModTime: j.mtime, Linked: true}, err
					continue
				}
				sum, n, err := copySummed(from, to)
				out[i], errs[i] = FileSum{Path: j.rel, Size: n, Mode: j.mode, SHA256: sum, ModTime: j.mtime}, err
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	var total int64
	for i := range out {
		if errs[i] != nil {
			return nil, 0, errs[i]
		}
		total += out[i].Size
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, total, nil
}

// VerifyAgainstSource checks that every file of a copy made by CopyTreeSummed is byte for byte
// the source file it was summed from: the copy then has the sums of the manifest, proven
// without hashing it again. A source that changed since fails too. A linked file must still be
// the source file itself, at the size summed.
func VerifyAgainstSource(copyRoot, srcRoot string, files []FileSum) error {
	a, b := getBuffer(), getBuffer()
	defer putBuffer(a)
	defer putBuffer(b)
	for _, f := range files {
		if f.Linked {
			if err := sameFile(filepath.Join(copyRoot, f.Path), filepath.Join(srcRoot, f.Path), f.Size); err != nil {
				return err
			}
			continue
		}
		if err := sameBytes(filepath.Join(copyRoot, f.Path), filepath.Join(srcRoot, f.Path), f.Size, a, b); err != nil {
			return err
		}
	}
	return nil
}

func sameFile(copyPath, srcPath string, size int64) error {
	ci, err := os.Stat(copyPath)
	if err != nil {
		return err
	}
	si, err := os.Stat(srcPath)
	if err != nil {
		return err
	}
	if !os.SameFile(ci, si) || ci.Size() != size {
		return fmt.Errorf("%s is no longer a link to %s at %d bytes", copyPath, srcPath, size)
	}
	return nil
}

func sameBytes(copyPath, srcPath string, size int64, a, b []byte) error {
	cf, err := os.Open(copyPath)
	if err != nil {
		return err
	}
	defer cf.Close()
	sf, err := os.Open(srcPath)
	if err != nil {
		return err
	}
	defer sf.Close()
	var seen int64
	for {
		n, err := io.ReadFull(cf, a)
		m, serr := io.ReadFull(sf, b[:n])
		if m != n || !bytes.Equal(a[:n], b[:n]) || (serr != nil && serr != io.ErrUnexpectedEOF && serr != io.EOF) {
			return fmt.Errorf("%s differs from its source %s near byte %d", copyPath, srcPath, seen)
		}
		seen += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if extra, _ := sf.Read(b[:1]); extra > 0 || seen != size {
		return fmt.Errorf("%s has %d bytes, its source %s another size (manifest: %d)", copyPath, seen, srcPath, size)
	}
	return nil
}

// copySummed copies src to dst, in the kernel where it can (copyInKernel), else through this
// process's buffers (copyHashing), and returns the checksum of the copy's bytes. dst is not
// fsynced: see SyncTree.
func copySummed(src, dst string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return "", 0, err
	}
	err = out.Chmod(0o600) // over a file left by an interrupted copy, too
	var sum string
	var n int64
	if err == nil {
		var handled bool
		if sum, n, handled, err = copyInKernel(out, in); err == nil && !handled {
			sum, n, err = copyHashing(out, in)
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("copy %s: %w", src, err)
	}
	return sum, n, nil
}

// copyDepth is how many buffers a copy has in flight: read and written, or being hashed.
const copyDepth = 4

// copyHashing copies in to out and returns the hex sha256 of the bytes written. It reads and
// writes in this goroutine while another hashes what was written, each buffer reused only once
// hashed: on two CPUs a 1 GiB db's copy waited 0.6 s for its hash before.
func copyHashing(out io.Writer, in io.Reader) (string, int64, error) {
	free := make(chan []byte, copyDepth)
	for range copyDepth {
		free <- getBuffer()
	}
	written := make(chan []byte, copyDepth)
	h := sha256.New()
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for b := range written {
			h.Write(b)
			free <- b[:cap(b)]
		}
	}()
	var n int64
	var err error
	for {
		b := <-free
		k, rerr := io.ReadFull(in, b)
		if k > 0 {
			if _, err = out.Write(b[:k]); err != nil {
				free <- b
				break
			}
			n += int64(k)
			written <- b[:k]
		} else {
			free <- b
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(written)
	<-hashed
	for range copyDepth {
		putBuffer(<-free)
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// onlyReader hides the file's WriterTo/ReaderFrom so that io.CopyBuffer reads through buf.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
