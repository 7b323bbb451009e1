package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// An operator's first look at Kubernetes on the sandbox: sandbox up --kubernetes starts a real
// kube-apiserver beside each member, on that member's etcd alone (as kubeadm does), and writes
// a kubeconfig with a context per member. A ConfigMap written through m2's apiserver is read
// through m3's; sandbox down stops the apiservers with the members.
func TestSandboxUpKubernetes(t *testing.T) {
	t.Parallel()
	etcdtest.KubeAPIServerBinary(t)
	bin := etcdtest.EtcdmedicBinary(t)
	dir := filepath.Join(t.TempDir(), "sb")
	t.Cleanup(func() { exec.Command(bin, "sandbox", "down", "--dir", dir).Run() })

	code, out := runBinary(t, bin, "sandbox", "up", "--kubernetes", "--dir", dir)
	if code != 0 || !strings.Contains(out, "export KUBECONFIG=") {
		t.Fatalf("sandbox up --kubernetes: exit %d: %s", code, out)
	}
	st := sandboxStatus(t, bin, dir)
	if len(st.APIServers) != 3 || st.Kubeconfig == "" {
		t.Fatalf("sandbox status: %d apiservers, kubeconfig %q", len(st.APIServers), st.Kubeconfig)
	}
	for i, s := range st.APIServers {
		if !s.Ready || len(s.EtcdServers) != 1 || s.EtcdServers[0] != st.Members[i].ClientURL {
			t.Errorf("apiserver %s: ready %v, --etcd-servers %v; want ready on %s alone (%s)", s.Name, s.Ready, s.EtcdServers, st.Members[i].ClientURL, s.Error)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Data: map[string]string{"from": "m2"}}
	if _, err := kubeClient(t, st.Kubeconfig, "m2").CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through m2's apiserver: %v", err)
	}
	got, err := kubeClient(t, st.Kubeconfig, "m3").CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil || got.Data["from"] != "m2" {
		t.Fatalf("read through m3's apiserver: %v %v", got, err)
	}

	if code, out := runBinary(t, bin, "sandbox", "down", "--dir", dir); code != 0 {
		t.Fatalf("sandbox down: exit %d: %s", code, out)
	}
	for _, s := range st.APIServers {
		if processRuns(s.PID) {
			t.Errorf("the apiserver beside %s (pid %d) still runs after sandbox down", s.Name, s.PID)
		}
	}
}

// processRuns: pid is a live process (not a zombie left to an init that does not reap).
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}

// kubeClient is a client-go clientset for one context of a kubeconfig, as kubectl
// --context NAME would connect.
func kubeClient(t *testing.T, kubeconfig, context string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
