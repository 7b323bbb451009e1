package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// operatorDouble is the person at the terminal during a runbook recovery: it reads what
// etcdmedic prints, runs every command of each checkpoint exactly as printed (bash -c), and
// answers "done". kubeadm is not here, so the kubeadm lines are done by kubeJoin instead,
// the way kubeadm join does it for etcd (add as a learner, start, promote).
type operatorDouble struct {
	t        *testing.T
	answers  io.Writer
	kubeJoin func(node string) error

	mu          sync.Mutex
	checkpoints []string // "node: title"
	commands    []string
	failures    []string
}

// applyWithOperator runs recover apply on planDir with the operator double at its terminal,
// kubeJoin standing in for kubeadm join, and fails the test unless apply and every command
// the double ran succeeded. It returns the double and what apply printed.
func applyWithOperator(t *testing.T, planDir string, kubeJoin func(node string) error) (*operatorDouble, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), etcdtest.EtcdmedicBinary(t), "recover", "apply", planDir, "--yes", "--step-timeout", "90s")
	answers, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	printed, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var transcript strings.Builder
	op := &operatorDouble{t: t, answers: answers, kubeJoin: kubeJoin}
	done := make(chan struct{})
	go func() { defer close(done); op.follow(io.TeeReader(printed, &transcript)) }()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	<-done
	if err != nil || len(op.failures) > 0 {
		t.Fatalf("recover apply: %v; failed commands %q\n%s", err, op.failures, lastLines(transcript.String(), 60))
	}
	return op, transcript.String()
}

func (o *operatorDouble) follow(printed io.Reader) {
	var pending strings.Builder
	var node, title string
	var cmds []string
	buf := make([]byte, 4096)
	for {
		n, err := printed.Read(buf)
		pending.Write(buf[:n])
		text := pending.String()
		for {
			i := strings.IndexByte(text, '\n')
			if i < 0 {
				break
			}
			line := text[:i]
			text = text[i+1:]
			switch {
			case strings.HasPrefix(line, ">>> on node "):
				node, title, _ = strings.Cut(strings.TrimPrefix(line, ">>> on node "), ": ")
				cmds = nil
			case strings.HasPrefix(line, "    $ "):
				cmds = append(cmds, strings.TrimPrefix(line, "    $ "))
			}
		}
		if strings.HasSuffix(text, runbook.Prompt) {
			text = ""
			o.do(node, title, cmds)
			io.WriteString(o.answers, "done\n")
		}
		pending.Reset()
		pending.WriteString(text)
		if err != nil {
			return
		}
	}
}

func (o *operatorDouble) do(node, title string, cmds []string) {
	o.mu.Lock()
	o.checkpoints = append(o.checkpoints, node+": "+title)
	o.mu.Unlock()
	for _, c := range cmds {
		o.mu.Lock()
		o.commands = append(o.commands, c)
		o.mu.Unlock()
		var err error
		var out []byte
		switch {
		case strings.HasPrefix(c, "kubeadm init phase upload-certs"), strings.HasPrefix(c, "kubeadm token create"), strings.Contains(c, "kubeadm reset -f"):
			// Credentials and the node reset: nothing to do without kubeadm (the data dir was
			// moved aside by the line before).
		case strings.HasPrefix(c, "<the kubeadm join command"):
			err = o.kubeJoin(node)
		default:
			out, err = exec.Command("bash", "-c", c).CombinedOutput()
		}
		if err != nil {
			o.mu.Lock()
			o.failures = append(o.failures, c+": "+err.Error()+": "+string(out))
			o.mu.Unlock()
		}
	}
}

// Incident 2 on nodes etcdmedic cannot act on: every member is on the runbook. The operator
// (a double that runs the printed commands verbatim) stops and restarts the survivor, moves old
// data aside, starts the rejoining member with the printed flags, and rejoins the wiped node
// with kubeadm join --control-plane. etcdmedic checks each checkpoint over the etcd API, and
// nothing acknowledged is lost.
func TestRecoverThroughAPrintedRunbook(t *testing.T) {
	t.Parallel()
	c, ledger := quorumLost(t) // m3 wiped, m2 killed, m1 alone
	for _, m := range c.Members() {
		dir := m.DataDir
		t.Cleanup(func() { // the operator double starts members by hand: stop them
			if pid, _, ok := local.FindProcess(dir); ok {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := append(recoverPlanArgs(t, c, planDir, backups), "--runbook", "m1", "--runbook", "m2", "--kubeadm-join", "m3")
	if code, out, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}

	m3 := c.Member("m3")
	op, transcript := applyWithOperator(t, planDir, func(node string) error {
		return kubeadmJoinsEtcd(t.Context(), c, m3, strings.Fields(etcdmedicEtcd(t)))
	})
	for _, want := range []string{"m1: stop etcd member m1", "on node m3"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("no checkpoint %q in:\n%s", want, transcript)
		}
	}
	joined := strings.Join(op.commands, "\n")
	for _, want := range []string{"--force-new-cluster", "--initial-cluster-state existing", "--control-plane --certificate-key", "etcdmedic-quarantine"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the runbook has no command with %q:\n%s", want, joined)
		}
	}
	t.Logf("%d checkpoints: %q", len(op.checkpoints), op.checkpoints)
	checkRecovered(t, c, ledger, planDir)
}

// kubeadmJoinsEtcd does for etcd what kubeadm join --control-plane does on the reset node:
// add its member as a learner, start etcd with the cluster it was given, promote it.
func kubeadmJoinsEtcd(ctx context.Context, c *etcdtest.Cluster, m *etcdtest.Member, etcd []string) error {
	var eps []string
	for _, o := range c.Members() {
		if o.Name != m.Name {
			eps = append(eps, o.ClientURL)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	j := &member.Joiner{Client: cli, Runtime: local.Runtime{Command: etcd}, CatchUp: time.Minute}
	_, err = j.Join(ctx, member.JoinSpec{Name: m.Name, PeerURLs: []string{m.PeerURL}, ClientURLs: []string{m.ClientURL}, DataDir: m.DataDir})
	return err
}
