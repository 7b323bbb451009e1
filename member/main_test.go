package member

import (
	"os"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TestMain builds the etcd the replace tests run (the linked one) before them, and makes every
// process they start die with the test binary.
func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, etcdtest.Needs{Servers: []string{etcdtest.Linked}}))
}
