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

// kubeadmEtcdManifest is the etcd static pod manifest kubeadm writes on a control-plane node
// (kubeadm v1.3x, phases "etcd local" on the first master and "control-plane-join etcd" on the
// others), with this test's loopback URLs and folders in place of the node's IP and
// /var/lib/etcd, and without the TLS files (the test cluster speaks plain HTTP). The first
// master's --initial-cluster lists only itself and has no --initial-cluster-state; a joining
// master's lists the members that existed when it joined, itself last, with
// --initial-cluster-state=existing.
func kubeadmEtcdManifest(name, dataDir, client, peer, metrics, initialCluster, state string) string {
	stateLine := ""
	if state == "existing" {
		stateLine = "\n    - --initial-cluster-state=existing"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: %[3]s
  creationTimestamp: null
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
    - --feature-gates=InitialCorruptCheck=true
    - --initial-advertise-peer-urls=%[4]s
    - --initial-cluster=%[6]s%[7]s
    - --listen-client-urls=%[3]s
    - --listen-metrics-urls=%[5]s
    - --listen-peer-urls=%[4]s
    - --name=%[1]s
    - --snapshot-count=10000
    - --watch-progress-notify-interval=5s
    image: registry.k8s.io/etcd:3.6.4-0
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /livez
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    readinessProbe:
      failureThreshold: 3
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: 2381
        scheme: HTTP
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
    - mountPath: /etc/kubernetes/pki/etcd
      name: etcd-certs
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /etc/kubernetes/pki/etcd
      type: DirectoryOrCreate
    name: etcd-certs
  - hostPath:
      path: /var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
status: {}
`, name, dataDir, client, peer, metrics, initialCluster, stateLine)
}
