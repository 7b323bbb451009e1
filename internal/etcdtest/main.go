package etcdtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

// Needs names the binaries a test package's tests run, for Main to build before them.
type Needs struct {
	// Servers are the etcd server versions the tests run (V3_5_19, ..., V3_6, Linked): through
	// NewCluster or Binary, or through etcdmedic commands that run their own (a drill).
	Servers []string
	// Etcdutl and Etcdctl are the versions of those tools the tests run.
	Etcdutl, Etcdctl []string
	// Etcdmedic is set when the tests run the CLI (EtcdmedicBinary); Linked implies it.
	Etcdmedic bool
	// KubeAPIServer is set when the tests run kube-apiserver (KubeAPIServerBinary): about
	// 5 minutes to build the first time.
	KubeAPIServer bool
	// S3 is set when the tests run a real S3 server (StartS3): SeaweedFS, about 6 minutes to
	// build the first time.
	S3 bool
	// Early names the package's longest tests: when the whole package runs, each starts at
	// once in a process of its own instead of waiting for a parallel slot (RanEarly).
	Early []string
	// Foreground marks the run's longest package (cmd/etcdmedic). Every other package's test
	// binary runs at a lower CPU priority (backgroundNice), and every process its tests start
	// with it, so that on a busy machine it takes what the longest one leaves.
	Foreground bool
}

// backgroundNice is the nice value of the test binaries of packages not in the Foreground.
const backgroundNice = 5

// Main runs a test package's tests; call it from TestMain: os.Exit(etcdtest.Main(m, needs)).
//
// Every process the tests start dies with the test binary, however it ends (a failure, a
// go test -timeout, a SIGKILL), detached ones too: Main points TMPDIR at a root dir of the run,
// which every child inherits, and a watchdog process kills whatever runs with it once the
// test binary is gone, then removes the root. At start it sweeps what earlier killed runs left.
//
// When the whole package runs (no -test.run), Main first builds what needs names (a cold
// cache takes about 75 s per etcd version), outside go test's -timeout, which starts with the
// first test. Tests still build lazily what is missing.
func Main(m *testing.M, needs Needs) int {
	if root := os.Getenv(reaperRootEnv); root != "" {
		return watch(root)
	}
	rr, err := startRunRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: %v\n", err)
		return 1
	}
	defer rr.end()
	if !needs.Foreground {
		if err := niceEveryThread(backgroundNice); err != nil {
			fmt.Fprintf(os.Stderr, "etcdtest: nice %d: %v\n", backgroundNice, err)
		}
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	if flagValue("test.run") == "" && flagValue("test.list") == "" {
		needs.build()
	}
	startEarly(needs.Early)
	return m.Run()
}

// niceEveryThread raises the nice value of every thread of this process to nice (a process
// already nicer keeps its own): on Linux it is each thread's, and a new thread or process
// takes the one of the thread that made it.
func niceEveryThread(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if now, err := threadNice(tid); err != nil || now >= nice {
			continue // gone, or nice enough
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// threadNice is thread tid's nice value (field 19 of proc(5)).
func threadNice(tid int) (int, error) {
	fields, err := statFields(fmt.Sprintf("/proc/self/task/%d/stat", tid), 17)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(fields[16])
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// build builds every binary in n, saying so for each one that is not cached yet. A failed
// build is reported and left to the tests that need it.
func (n Needs) build() {
	etcdmedic := n.Etcdmedic
	for _, v := range n.Servers {
		if v == Linked {
			etcdmedic = true
			continue
		}
		prebuild("etcd", v, etcdbin.Cached(v), etcdbin.Path)
	}
	if n.KubeAPIServer {
		v := etcdbin.KubeAPIServerVersion
		prebuild("kube-apiserver", v, etcdbin.KubeAPIServerCached(v), etcdbin.KubeAPIServerPath)
	}
	if n.S3 {
		v := etcdbin.SeaweedFSVersion
		prebuild("SeaweedFS weed", v, etcdbin.WeedCached(v), etcdbin.WeedPath)
	}
	for _, v := range n.Etcdutl {
		prebuild("etcdutl", v, etcdbin.EtcdutlCached(v), etcdbin.EtcdutlPath)
	}
	for _, v := range n.Etcdctl {
		prebuild("etcdctl", v, etcdbin.EtcdctlCached(v), etcdbin.EtcdctlPath)
	}
	if etcdmedic {
		started := time.Now()
		if _, err := etcdmedicBinary(); err != nil {
			fmt.Fprintf(os.Stderr, "etcdtest: build etcdmedic: %v\n", err)
			return
		}
		if took := time.Since(started); took > time.Second {
			fmt.Fprintf(os.Stderr, "etcdtest: built etcdmedic in %s\n", took.Round(time.Second))
		}
	}
}

// prebuild builds one etcd tool of version through etcdbin, unless cached.
func prebuild(tool, version string, cached bool, path func(context.Context, string) (string, error)) {
	if cached {
		return
	}
	dir, _ := etcdbin.CacheDir()
	about := "about 75 s"
	switch tool {
	case "kube-apiserver":
		about = "about 3.5 minutes"
	case "SeaweedFS weed":
		about = "about 6 minutes"
	}
	fmt.Fprintf(os.Stderr, "etcdtest: building %s %s before the tests (%s, cached in %s)\n", tool, version, about, dir)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), binaryBuildTimeout)
	defer cancel()
	if _, err := path(ctx, version); err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: build %s %s: %v\n", tool, version, err)
		return
	}
	fmt.Fprintf(os.Stderr, "etcdtest: %s %s ready in %s\n", tool, version, time.Since(started).Round(time.Second))
}
