package upgrade

import (
	"os"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TestMain builds the etcd the apply tests run before them, and makes every process they start
// die with the test binary.
func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, etcdtest.Needs{Servers: []string{etcdtest.V3_5_24}}))
}
