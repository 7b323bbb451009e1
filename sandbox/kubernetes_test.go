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

// kube-apiserver gives up when its first repair of the service IPs fails, and exits 60 s after
// its start (kubernetes/kubernetes#130377: apiservers started together on a new etcd race to
// create the kubernetes Service's IPAddress). Kubelet starts it again, and so does the sandbox:
// here the apiserver's first start exits the way it does, and the second is the real one.
func TestAnAPIServerThatGaveUpItsServiceIPRepairIsStartedAgain(t *testing.T) {
	t.Parallel()
	sb, err := Up(t.Context(), Options{Dir: filepath.Join(t.TempDir(), "sb"), Members: 1, Command: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}})
	if sb != nil {
		t.Cleanup(func() { sb.Down(5 * time.Second) })
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	firstStart := filepath.Join(dir, "first-start-done")
	apiserver := filepath.Join(dir, "kube-apiserver")
	script := "#!/bin/sh\n" +
		"if [ ! -e '" + firstStart + "' ]; then\n" +
		"  : > '" + firstStart + "'\n" +
		"  echo 'E1204 19:54:48.842277   23148 repairip.go:235] \"Unhandled Error\" err=\"ipaddresses.networking.k8s.io \\\"10.96.0.1\\\" already exists\"' >&2\n" +
		"  echo 'F1204 19:55:47.481507   23148 hooks.go:204] PostStartHook \"start-service-ip-repair-controllers\" failed: unable to perform initial IP and Port allocation check' >&2\n" +
		"  exit 255\n" +
		"fi\n" +
		"exec '" + etcdtest.KubeAPIServerBinary(t) + "' \"$@\"\n"
	if err := os.WriteFile(apiserver, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := sb.StartKubernetes(t.Context(), apiserver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	s := sb.Kubernetes.APIServers[0]
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if log := string(b); !strings.Contains(log, "start-service-ip-repair-controllers") || !strings.Contains(log, "exited before it was ready; started again") {
		t.Errorf("the apiserver's log does not show its first start and the second:\n%s", lastLines(s.LogFile, 40))
	}
	if saved, err := Load(sb.Dir); err != nil || saved.Kubernetes == nil || saved.Kubernetes.APIServers[0].PID != s.PID || !apiServerRunning(&s) {
		t.Errorf("the sandbox's state does not name the running apiserver (pid %d): %v", s.PID, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Why an apiserver exited is read from the lines of its last start only.
func TestWhyAnAPIServerExited(t *testing.T) {
	race := `F1204 19:55:47.481507 23148 hooks.go:204] PostStartHook "start-service-ip-repair-controllers" failed: unable to perform initial IP and Port allocation check`
	for _, tc := range []struct {
		name, tail string
		want       exitCause
	}{
		{"its port was taken", "E1204 failed to listen: listen tcp 127.0.0.1:6443: bind: address already in use", portTaken},
		{"it gave up its service-IP repair", "I1204 Caches are synced\n" + race, startUpRace},
		{"a flag it does not know", "Error: unknown flag: --profiling", exitedForGood},
		{"started again after the race, then failed otherwise", race + "\n" + restartMark + "pid 7 exited before it was ready; started again\nError: unknown flag: --profiling", exitedForGood},
		{"started again after the race, and lost it again", race + "\n" + restartMark + "pid 7 exited before it was ready; started again\n" + race, startUpRace},
	} {
		if got := whyExited(tc.tail); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
