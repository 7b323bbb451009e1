package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// kubelet is a test double of kubelet for one node: it runs the etcd static pod found in its
// manifests folder as a real etcd process, restarts it when it exits or when the manifest
// changes, and stops it when the manifest leaves the folder.
type kubelet struct {
	t        *testing.T
	manifest string
	etcd     []string // how "etcd" in a manifest's command is run
	log      string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	running  string // the manifest content the process runs
	stop     chan struct{}
	done     chan struct{}
}

func startKubelet(t *testing.T, manifest string, etcd []string) *kubelet {
	k := &kubelet{t: t, manifest: manifest, etcd: etcd, log: manifest + ".log", stop: make(chan struct{}), done: make(chan struct{})}
	go k.loop()
	t.Cleanup(func() {
		close(k.stop)
		<-k.done
	})
	return k
}

func (k *kubelet) loop() {
	defer close(k.done)
	defer k.kill()
	lastStart := time.Time{}
	for {
		select {
		case <-k.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		b, err := os.ReadFile(k.manifest)
		if err != nil {
			k.kill() // the manifest left the folder: the pod goes away
			continue
		}
		sum := fmt.Sprintf("%x", sha256.Sum256(b))
		if k.alive() && sum == k.running {
			continue
		}
		if k.alive() {
			k.kill()
		}
		if time.Since(lastStart) < time.Second { // crash-loop back-off
			continue
		}
		argv, err := manifestCommand(b)
		if err != nil {
			continue
		}
		lastStart = time.Now()
		k.start(argv, sum)
	}
}

func manifestCommand(b []byte) ([]string, error) {
	var pod struct {
		Spec struct {
			Containers []struct {
				Command []string `json:"command"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pod); err != nil || len(pod.Spec.Containers) == 0 || len(pod.Spec.Containers[0].Command) == 0 {
		return nil, fmt.Errorf("no command")
	}
	return pod.Spec.Containers[0].Command, nil
}

func (k *kubelet) start(argv []string, sum string) {
	log, err := os.OpenFile(k.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	args := append(append([]string{}, k.etcd[1:]...), argv[1:]...)
	cmd := exec.Command(k.etcd[0], args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	k.mu.Lock()
	k.cmd, k.exited, k.running = cmd, exited, sum
	k.mu.Unlock()
}

func (k *kubelet) alive() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return false
	}
	select {
	case <-k.exited:
		return false
	default:
		return true
	}
}

func (k *kubelet) kill() {
	k.mu.Lock()
	cmd, exited := k.cmd, k.exited
	k.cmd = nil
	k.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// kubeadmEtcdManifest is the etcd static pod kubeadm writes on a control-plane node.
func kubeadmEtcdManifest(name, dataDir, client, peer, initialCluster, state string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: %[3]s
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=%[3]s
    - --data-dir=%[2]s
    - --initial-advertise-peer-urls=%[4]s
    - --initial-cluster=%[5]s
    - --initial-cluster-state=%[6]s
    - --listen-client-urls=%[3]s
    - --listen-peer-urls=%[4]s
    - --name=%[1]s
    - --snapshot-count=10000
    image: registry.k8s.io/etcd:3.5.16-0
    imagePullPolicy: IfNotPresent
    name: etcd
  hostNetwork: true
  priorityClassName: system-node-critical
`, name, dataDir, client, peer, initialCluster, state)
}
