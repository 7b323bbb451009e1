package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	toolEtcdutl   = "etcdutl snapshot status"
	toolEtcdmedic = "etcdmedic inspect"
	dropCaches    = "/proc/sys/vm/drop_caches"
	// runTimeout bounds one run of either tool.
	runTimeout = 5 * time.Minute
)

// sample is one run of one tool.
type sample struct {
	wall      time.Duration
	maxRSSKiB int64
	readBytes int64 // from the block layer (ru_inblock): what a cold run read from disk
}

// toolResult is every run of one tool on one data dir.
type toolResult struct {
	name       string
	warm, cold []sample
}

// sizeResult is one data dir and how both tools did on it.
type sizeResult struct {
	built    dataDirInfo
	dataDir  string
	files    dirFiles
	etcdutl  toolResult
	medic    toolResult
	evictHow string
	// residentAfterEvict is the largest share of the data dir's pages still in the page cache
	// right after an eviction, across cold runs: the check that cold really was cold.
	residentAfterEvict float64
	unchanged          bool
}

// dirFiles summarises the data dir's files.
type dirFiles struct {
	dbBytes   int64
	walBytes  int64
	walFiles  int
	snapFiles int
}

// measure runs both tools on dataDir, warm then cold, alternating them, and checks that
// neither changed a byte of it.
func measure(ctx context.Context, cfg config, dataDir string, built dataDirInfo, etcdutl, etcdmedic string) (sizeResult, error) {
	res := sizeResult{built: built, dataDir: dataDir, etcdutl: toolResult{name: toolEtcdutl}, medic: toolResult{name: toolEtcdmedic}}
	db := filepath.Join(dataDir, "member", "snap", "db")
	var err error
	if res.files, err = describe(dataDir); err != nil {
		return res, err
	}
	before, err := hashDir(dataDir)
	if err != nil {
		return res, err
	}
	tools := []struct {
		r       *toolResult
		bin     string
		args    []string
		maxExit int
	}{
		{&res.etcdutl, etcdutl, []string{"snapshot", "status", db, "-w", "json"}, 0},
		// etcdmedic exits 1 or 2 when it has findings: the inspection still ran.
		{&res.medic, etcdmedic, []string{"inspect", dataDir, "-w", "json"}, 2},
	}
	logf("measuring %s (db %d MiB, WAL %d MiB in %d segments): %d warm and %d cold runs of each tool",
		dataDir, res.files.dbBytes>>20, res.files.walBytes>>20, res.files.walFiles, cfg.runs, cfg.runs)
	for _, t := range tools { // warm the page cache, and check each tool works on this dir
		if _, err := runTool(ctx, t.bin, t.args, t.maxExit); err != nil {
			return res, err
		}
	}
	for i := range cfg.runs {
		for j := range tools {
			t := tools[(i+j)%len(tools)] // alternate which tool goes first
			s, err := runTool(ctx, t.bin, t.args, t.maxExit)
			if err != nil {
				return res, err
			}
			t.r.warm = append(t.r.warm, s)
		}
	}
	for i := range cfg.runs {
		for j := range tools {
			t := tools[(i+j)%len(tools)]
			how, resident, err := evict(dataDir, cfg.dropCaches)
			if err != nil {
				return res, err
			}
			res.evictHow, res.residentAfterEvict = how, max(res.residentAfterEvict, resident)
			s, err := runTool(ctx, t.bin, t.args, t.maxExit)
			if err != nil {
				return res, err
			}
			t.r.cold = append(t.r.cold, s)
		}
		logf("  cold round %d of %d done", i+1, cfg.runs)
	}
	after, err := hashDir(dataDir)
	if err != nil {
		return res, err
	}
	if !bytes.Equal(before[db], after[db]) {
		return res, fmt.Errorf("the db %s changed during the measurements: sha256 %x before, %x after", db, before[db], after[db])
	}
	res.unchanged = len(before) == len(after)
	for path, sum := range before {
		if !bytes.Equal(after[path], sum) {
			res.unchanged = false
			logf("WARNING: %s changed during the measurements", path)
		}
	}
	logf("  db sha256 %s unchanged", hex.EncodeToString(before[db]))
	return res, nil
}

// runTool runs one tool through a runner process (see runnerEnv) and reads its wall time and
// resource usage. The tool must print JSON and exit with at most maxExit.
func runTool(ctx context.Context, bin string, args []string, maxExit int) (sample, error) {
	self, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer r.Close()
	cmd := exec.CommandContext(ctx, self, append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), runnerEnv+"=1")
	cmd.ExtraFiles = []*os.File{w}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Start()
	w.Close()
	if err != nil {
		return sample{}, fmt.Errorf("start the runner for %s: %w", bin, err)
	}
	var res runnerResult
	decodeErr := json.NewDecoder(r).Decode(&res)
	if err := cmd.Wait(); err != nil {
		return sample{}, fmt.Errorf("runner for %s %v: %w\n%s", bin, args, err, errOut.String())
	}
	if decodeErr != nil {
		return sample{}, fmt.Errorf("runner for %s reported nothing: %w\n%s", bin, decodeErr, errOut.String())
	}
	if res.Error != "" || res.ExitCode < 0 || res.ExitCode > maxExit {
		return sample{}, fmt.Errorf("%s %v: exit %d %s\n%s", bin, args, res.ExitCode, res.Error, errOut.String())
	}
	if !json.Valid(out.Bytes()) {
		return sample{}, fmt.Errorf("%s %v printed no JSON: %q", bin, args, out.String())
	}
	return sample{wall: time.Duration(res.WallNS), maxRSSKiB: res.MaxRSSKiB, readBytes: res.InBlock * 512}, nil
}

// evict drops the data dir's files from the page cache: POSIX_FADV_DONTNEED on each file
// (opened read-only, nothing written or synced), then the whole page cache through
// /proc/sys/vm/drop_caches when allowed and writable. It returns how it evicted and the share
// of the data dir's pages still resident afterwards.
func evict(dataDir string, useDropCaches bool) (string, float64, error) {
	how := "fadvise(DONTNEED) on every data dir file"
	err := walkFiles(dataDir, func(path string, f *os.File) error {
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		return "", 0, fmt.Errorf("evict %s from the page cache: %w", dataDir, err)
	}
	if useDropCaches {
		if err := os.WriteFile(dropCaches, []byte("1"), 0o200); err == nil {
			how += " + echo 1 > " + dropCaches
		}
	}
	var resident, total int64
	err = walkFiles(dataDir, func(path string, f *os.File) error {
		r, t, err := residentPages(f)
		resident, total = resident+r, total+t
		return err
	})
	if err != nil || total == 0 {
		return how, 0, err
	}
	return how, float64(resident) / float64(total), nil
}

// residentPages counts the file's pages in the page cache (mincore on a read-only mapping,
// which faults nothing in).
func residentPages(f *os.File) (resident, total int64, err error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (st.Size()+page-1)/page)
	// x/sys/unix has no Mincore wrapper.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, 0, fmt.Errorf("mincore %s: %w", f.Name(), errno)
	}
	for _, v := range vec {
		resident += int64(v & 1)
	}
	return resident, int64(len(vec)), nil
}

// walkFiles opens every regular file under dir read-only and calls fn with it.
func walkFiles(dir string, fn func(path string, f *os.File) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return fn(path, f)
	})
}

// hashDir returns the sha256 of every file under dir.
func hashDir(dir string) (map[string][]byte, error) {
	sums := map[string][]byte{}
	err := walkFiles(dir, func(path string, f *os.File) error {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return fmt.Errorf("hash %s: %w", path, err)
		}
		sums[path] = h.Sum(nil)
		return nil
	})
	return sums, err
}

func describe(dataDir string) (dirFiles, error) {
	var d dirFiles
	st, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return d, err
	}
	d.dbBytes = st.Size()
	wals, _ := filepath.Glob(filepath.Join(dataDir, "member", "wal", "*.wal"))
	for _, w := range wals {
		if st, err := os.Stat(w); err == nil {
			d.walBytes += st.Size()
		}
	}
	d.walFiles = len(wals)
	snaps, _ := filepath.Glob(filepath.Join(dataDir, "member", "snap", "*.snap"))
	d.snapFiles = len(snaps)
	return d, nil
}

func median(samples []sample, field func(sample) int64) int64 {
	vals := make([]int64, len(samples))
	for i, s := range samples {
		vals[i] = field(s)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	if len(vals) == 0 {
		return 0
	}
	if len(vals)%2 == 1 {
		return vals[len(vals)/2]
	}
	return (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
}
