package local_test

import (
	"os"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TestMain builds the binaries the tests run before them, and makes every process they start
// die with the test binary.
func TestMain(m *testing.M) {
	if os.Getenv(fakeEtcd) != "" {
		select {} // a process that looks like an etcd (see startFakeEtcd): it waits to be killed
	}
	os.Exit(etcdtest.Main(m, etcdtest.Needs{Etcdmedic: true}))
}
