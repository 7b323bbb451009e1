package etcdtest

import (
	"os"
	"testing"
)

// TestMain runs the harness's own tests the way every package runs its: through Main.
func TestMain(m *testing.M) {
	os.Exit(Main(m, Needs{Servers: []string{V3_5_19, V3_5_21, V3_5_24, V3_6, Linked}, S3: true}))
}
