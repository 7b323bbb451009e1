package runbook

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/runtime"
)

// Style is how the node runs etcd, which decides the commands printed.
type Style string

const (
	// Process: etcd runs as a plain process (or a systemd unit the operator knows).
	Process Style = "process"
	// Kubeadm: etcd runs as kubeadm's static pod from /etc/kubernetes/manifests/etcd.yaml.
	Kubeadm Style = "kubeadm"
)

// KubeadmManifest is where kubeadm keeps etcd's static pod manifest on every control-plane node.
const KubeadmManifest = "/etc/kubernetes/manifests/etcd.yaml"

// Runtime prints the steps of one member's node and checks each over the etcd API.
type Runtime struct {
	Node     string // the node's name, as the operator knows it
	Style    Style
	Operator *Operator
	// EtcdCommand is how etcd is run on that node (Process style), e.g. "/usr/local/bin/etcd".
	EtcdCommand string
	// Conn reaches the member's client URLs (TLS), for the checks.
	Conn cluster.Conn
	// Wait bounds each check.
	Wait time.Duration
}

func (r Runtime) wait() time.Duration {
	if r.Wait == 0 {
		return 30 * time.Second
	}
	return r.Wait
}

// Stop asks the operator to stop the member, then checks that it no longer answers.
func (r Runtime) Stop(ctx context.Context, m runtime.MemberSpec) error {
	if !r.answers(ctx, m) {
		r.Operator.Say("%s does not answer on %s: already stopped", m.Name, strings.Join(m.ClientURLs, ","))
		return nil
	}
	c := Checkpoint{Node: r.Node, Title: fmt.Sprintf("stop etcd member %s; leave its data dir %s as it is", m.Name, m.DataDir)}
	switch r.Style {
	case Kubeadm:
		c.Commands = []string{
			"mkdir -p /etc/kubernetes/etcdmedic-stopped",
			"mv " + KubeadmManifest + " /etc/kubernetes/etcdmedic-stopped/etcd.yaml",
		}
		c.Notes = []string{"kubelet stops the etcd pod within about 20 s (crictl ps --name etcd shows it gone)"}
	default:
		c.Commands = []string{"pkill -TERM -f -- " + Quote("--data-dir[= ]"+regexp.QuoteMeta(m.DataDir)+"( |$)")}
		c.Notes = []string{"or: systemctl stop etcd, if a unit runs it"}
	}
	for try := 0; try < 3; try++ {
		if err := r.Operator.Confirm(c); err != nil {
			return err
		}
		if r.stopped(ctx, m) {
			r.Operator.Say("checked: %s no longer answers on %s", m.Name, strings.Join(m.ClientURLs, ","))
			return nil
		}
		c.Title = fmt.Sprintf("%s still answers on %s: it is not stopped yet; stop it", m.Name, strings.Join(m.ClientURLs, ","))
	}
	return fmt.Errorf("%s still answers on %s after three checkpoints", m.Name, strings.Join(m.ClientURLs, ","))
}

// Start asks the operator to start the member with exactly these flags; whether it runs is
// checked over the etcd API by the step that follows (a forced survivor must take writes, a
// learner must catch up and be promoted).
func (r Runtime) Start(ctx context.Context, m runtime.MemberSpec) error {
	c := Checkpoint{Node: r.Node, Title: fmt.Sprintf("start etcd member %s with these flags", m.Name)}
	switch r.Style {
	case Kubeadm:
		c.Commands = []string{
			"cp /etc/kubernetes/etcdmedic-stopped/etcd.yaml /etc/kubernetes/etcdmedic-stopped/etcd.yaml.before-" + time.Now().UTC().Format("20060102T150405Z"),
			"vi /etc/kubernetes/etcdmedic-stopped/etcd.yaml   # in spec.containers[0].command: " + manifestEdits(m),
			"mv /etc/kubernetes/etcdmedic-stopped/etcd.yaml " + KubeadmManifest,
		}
		c.Notes = []string{"kubelet starts the pod within about 20 s; keep every other line of the manifest as it is"}
	default:
		cmd := r.EtcdCommand
		if cmd == "" {
			cmd = "etcd"
		}
		c.Commands = []string{fmt.Sprintf("nohup %s %s >>%s 2>&1 </dev/null &", cmd, shellJoin(m.Flags()), Quote(strings.TrimRight(m.DataDir, "/")+".log"))}
		c.Notes = []string{"or put exactly these flags in the unit that runs etcd and start it"}
	}
	return r.Operator.Confirm(c)
}

// manifestEdits says which flags the manifest must carry for spec m.
func manifestEdits(m runtime.MemberSpec) string {
	edits := []string{"--initial-cluster=" + m.InitialCluster, "--initial-cluster-state=" + m.ClusterState}
	force := false
	for _, f := range m.ExtraFlags {
		if f == "--force-new-cluster" {
			force = true
		}
	}
	if force {
		edits = append(edits, "add --force-new-cluster")
	} else {
		edits = append(edits, "no --force-new-cluster line")
	}
	return strings.Join(edits, ", ")
}

// answers reports whether the member answers Status on one of its client URLs.
func (r Runtime) answers(ctx context.Context, m runtime.MemberSpec) bool {
	cli, err := r.Conn.To(m.ClientURLs).Client()
	if err != nil {
		return false
	}
	defer cli.Close()
	for _, u := range m.ClientURLs {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Status(sctx, u)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// stopped waits (up to Wait) until the member stops answering.
func (r Runtime) stopped(ctx context.Context, m runtime.MemberSpec) bool {
	deadline := time.Now().Add(r.wait())
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !r.answers(ctx, m) {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// shellJoin quotes what a shell would split.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Quote(a)
	}
	return strings.Join(out, " ")
}

// Quote makes s one word for a shell, quoted only where it has to be.
func Quote(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n'\"$`\\;&|<>*?()[]{}#~") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
