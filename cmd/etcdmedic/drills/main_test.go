package drills

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TestMain builds the binaries the drills run before them, and makes every process they start
// die with the test binary.
func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, etcdtest.Needs{
		// The upgrade drill runs v3.5.19, v3.5.24 and v3.6.16 too.
		Servers:       []string{etcdtest.V3_5_19, etcdtest.V3_5_24, etcdtest.V3_6, etcdtest.Linked},
		KubeAPIServer: true, // every drill runs with --kubernetes
	}))
}

// runBinaryWithin runs the built etcdmedic with args, bounded by limit, and returns its exit
// code and combined output.
func runBinaryWithin(t *testing.T, limit time.Duration, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		t.Fatalf("%v: %v", args, err)
	}
	return 0, string(out)
}
