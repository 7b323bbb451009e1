package etcdtest

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// RunWithin runs the command bin with args, bounded by limit, and returns its exit code and
// combined output; a command that cannot be run at all fails the test.
func RunWithin(t testing.TB, limit time.Duration, bin string, args ...string) (int, string) {
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
