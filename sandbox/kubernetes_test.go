package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// Another process of a busy machine listened on the port chosen for an apiserver before the
// apiserver bound it: the apiserver is started again on another port before anything uses its
// URL. The sandbox's Kubernetes comes up, its state and kubeconfig name the new port, and the
// first apiserver's log is kept beside the new one. (Not parallel: it chooses the ports.)
func TestAnAPIServerWhosePortWasTakenMovesToAnother(t *testing.T) {
	sb, err := Up(t.Context(), Options{Dir: filepath.Join(t.TempDir(), "sb"), Members: 1, Command: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}})
	if sb != nil {
		t.Cleanup(func() { sb.Down(5 * time.Second) })
	}
	if err != nil {
		t.Fatal(err)
	}
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	taken := squatter.Addr().(*net.TCPAddr).Port
	choose := freePorts
	t.Cleanup(func() { freePorts = choose })
	first := true
	freePorts = func(n int) ([]int, error) {
		if first {
			first = false
			return []int{taken}, nil
		}
		return choose(n)
	}

	if err := sb.StartKubernetes(t.Context(), etcdtest.KubeAPIServerBinary(t), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	s := sb.Kubernetes.APIServers[0]
	if s.Port == taken || !strings.HasSuffix(s.URL, ":"+itoa(s.Port)) {
		t.Fatalf("the apiserver serves on %s (port %d), the taken port was %d", s.URL, s.Port, taken)
	}
	if b, err := os.ReadFile(s.LogFile + ".port-" + itoa(taken) + "-taken"); err != nil || !strings.Contains(string(b), "address already in use") {
		t.Errorf("the first apiserver's log: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(sb.Kubernetes.Kubeconfig); err != nil || !strings.Contains(string(b), s.URL) {
		t.Errorf("the kubeconfig does not name %s: %v\n%s", s.URL, err, b)
	}
	if saved, err := Load(sb.Dir); err != nil || saved.Kubernetes == nil || saved.Kubernetes.APIServers[0].URL != s.URL {
		t.Errorf("the sandbox's state does not name %s: %v", s.URL, err)
	}
}

// An apiserver that exits before it is ready for another reason fails the start at once, with
// its log's last lines, instead of being waited for until the timeout.
func TestAnAPIServerThatExitsFailsTheStartAtOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sb")
	if err := makePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	exits := filepath.Join(dir, "kube-apiserver")
	if err := os.WriteFile(exits, []byte("#!/bin/sh\necho 'Error: unknown flag: --profiling' >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	sb := &Sandbox{Dir: dir, Members: []Member{{Name: "m1", ClientURL: "http://127.0.0.1:1"}}}
	// Waited for until the timeout, it would say "not ready after 2m0s".
	err := sb.StartKubernetes(t.Context(), exits, 2*time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "unknown flag: --profiling") {
		t.Fatalf("StartKubernetes: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
