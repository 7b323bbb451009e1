package archive_test

import (
	"os"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, etcdtest.Needs{
		Servers: []string{etcdtest.V3_5_24, etcdtest.V3_6},
		Etcdutl: []string{etcdtest.V3_6},
		S3:      true,
	}))
}
