package runbook

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/runtime"
)

func TestOperatorAnswers(t *testing.T) {
	c := Checkpoint{Node: "kvm120-52", Title: "stop etcd", Commands: []string{"systemctl stop kubelet"}}
	for _, tt := range []struct {
		in      string
		wantErr error
		ok      bool
	}{
		{"done\n", nil, true},
		{"\n", nil, true},
		{"what?\nyes\n", nil, true},
		{"abort\n", ErrAborted, false},
		{"", nil, false}, // input closed: no answer
	} {
		var out bytes.Buffer
		err := NewOperator(strings.NewReader(tt.in), &out).Confirm(c)
		if (err == nil) != tt.ok || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
			t.Errorf("answer %q: err %v", tt.in, err)
		}
		if !strings.Contains(out.String(), ">>> on node kvm120-52: stop etcd\n    $ systemctl stop kubelet\n") {
			t.Errorf("printed:\n%s", out.String())
		}
	}
}

// The printed start command is the one a shell runs: every flag survives quoting.
func TestStartCommandRunsInAShell(t *testing.T) {
	spec := runtime.MemberSpec{Name: "m 1", DataDir: "/var/lib/etcd", ClientURLs: []string{"http://127.0.0.1:2379"}, PeerURLs: []string{"http://127.0.0.1:2380"},
		InitialCluster: "m 1=http://127.0.0.1:2380", ClusterState: "existing", ExtraFlags: []string{"--force-new-cluster"}}
	var out bytes.Buffer
	r := Runtime{Node: "n1", Style: Process, Operator: NewOperator(strings.NewReader("done\n"), &out), EtcdCommand: "printf '%s\\n'"}
	if err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	var cmd string
	for _, l := range strings.Split(out.String(), "\n") {
		if c, ok := strings.CutPrefix(l, "    $ "); ok {
			cmd = c
		}
	}
	cmd = strings.TrimSuffix(strings.Split(cmd, " >>")[0], " &")
	got, err := exec.Command("bash", "-c", strings.TrimPrefix(cmd, "nohup ")).Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	want := strings.Join(spec.Flags(), "\n") + "\n"
	if string(got) != want {
		t.Errorf("the shell saw\n%s\nwant\n%s", got, want)
	}
}

func TestKubeadmStartSaysWhichFlagsToSet(t *testing.T) {
	spec := runtime.MemberSpec{Name: "m1", DataDir: "/var/lib/etcd", InitialCluster: "m1=https://10.0.0.1:2380", ClusterState: "new", ExtraFlags: []string{"--force-new-cluster"}}
	var out bytes.Buffer
	r := Runtime{Node: "m1", Style: Kubeadm, Operator: NewOperator(strings.NewReader("done\n"), &out)}
	if err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--initial-cluster=m1=https://10.0.0.1:2380", "--initial-cluster-state=new", "add --force-new-cluster", "mv /etc/kubernetes/etcdmedic-stopped/etcd.yaml /etc/kubernetes/manifests/etcd.yaml"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
