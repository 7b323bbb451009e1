package etcdtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

// The etcd versions tests ask for by name. Each is a release built by etcdbin, except Linked.
const (
	// V3_5_19 is the last release before the membership fix (#19557, in 3.5.20): members it
	// adds at runtime keep "isLearner":true in bbolt after promotion.
	V3_5_19 = "v3.5.19"
	// V3_5_21 rewrites member records on every write but still ships stale learner flags
	// inside snapshots to new members (#20793).
	V3_5_21 = "v3.5.21"
	// V3_5_24 also fixes the learner flag when a member receives a snapshot (#20797).
	V3_5_24 = "v3.5.24"
	// V3_6 is the 3.6 release upgrades go to.
	V3_6 = "v3.6.16"
	// Linked is the etcd server compiled into etcdmedic (`etcdmedic etcd <flags>`), v3.7.x;
	// it needs no separate etcd build.
	Linked = "linked"
)

// binaryBuildTimeout bounds building one binary (etcd from source takes ~20 s here, more on a
// busy machine).
const binaryBuildTimeout = 15 * time.Minute

// EtcdBinary is what to exec to run an etcd server of one version.
type EtcdBinary struct {
	// Version is the harness version name: a release tag such as V3_5_19, or Linked.
	Version string
	// Path is the executable.
	Path string
	// PrefixArgs come before etcd's own flags: ["etcd"] for Linked, none for a release.
	PrefixArgs []string
}

// Args returns the full argument list (without argv[0]) that runs etcd with etcdFlags.
func (b EtcdBinary) Args(etcdFlags ...string) []string {
	args := append([]string(nil), b.PrefixArgs...)
	return append(args, etcdFlags...)
}

// Command returns an unstarted command that runs etcd with etcdFlags.
func (b EtcdBinary) Command(etcdFlags ...string) *exec.Cmd {
	return exec.Command(b.Path, b.Args(etcdFlags...)...)
}

// Binary returns the etcd server binary of version, building it on first use; a build failure
// fails the test.
func Binary(t testing.TB, version string) EtcdBinary {
	t.Helper()
	b, err := resolveBinary(version)
	if err != nil {
		t.Fatalf("etcd binary %s: %v", version, err)
	}
	return b
}

// ServerVersion is the version string a server of a harness version reports in its Status
// response: "3.5.19" for V3_5_19, the linked etcd's version for Linked.
func ServerVersion(v string) string {
	if v == Linked {
		return version.Version
	}
	return strings.TrimPrefix(v, "v")
}

func resolveBinary(version string) (EtcdBinary, error) {
	if version == Linked {
		path, err := linkedServerBinary()
		if err != nil {
			return EtcdBinary{}, err
		}
		return EtcdBinary{Version: Linked, Path: path, PrefixArgs: []string{"etcd"}}, nil
	}
	if !etcdbin.Cached(version) {
		fmt.Fprintf(os.Stderr, "etcdtest: building etcd %s inside a test (about 75 s): name it in the package's etcdtest.Needs to build it before the tests\n", version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), binaryBuildTimeout)
	defer cancel()
	path, err := etcdbin.Path(ctx, version)
	if err != nil {
		return EtcdBinary{}, fmt.Errorf("build etcd %s: %w", version, err)
	}
	return EtcdBinary{Version: version, Path: path}, nil
}
