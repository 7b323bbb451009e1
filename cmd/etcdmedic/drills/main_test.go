package drills

import (
	"os"
	"testing"

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
