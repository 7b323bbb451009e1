package main

import (
	"os"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TestMain builds the binaries the tests run before them, and makes every process they start
// die with the test binary.
func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, etcdtest.Needs{
		// The upgrade and doctor tests run the versions of incident 3 and its fixes.
		Servers: []string{etcdtest.V3_5_19, etcdtest.V3_5_21, etcdtest.V3_5_24, etcdtest.V3_6, etcdtest.Linked},
		Etcdutl: []string{etcdtest.V3_6},
		// Incident 2 on kubeadm masters, sandbox up --kubernetes, and the restores. (The
		// drills are tested in cmd/etcdmedic/drills, a test binary of their own.)
		KubeAPIServer: true,
		// The longest, about two minutes (most of it waiting for the informers' backoff).
		Early: []string{"TestRecoverKubeadmStaticPods"},
		// The run's longest package: the others give way to it for the CPU.
		Foreground: true,
	}))
}
