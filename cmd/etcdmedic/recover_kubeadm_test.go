package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

type master struct {
	name, manifest, dataDir, client, peer string
}

// Incident 2's setting: three kubeadm masters, etcd as static pods run by kubelet, each
// manifest with its own --initial-cluster (one, two, three entries). Two masters' etcd fail at
// every start: quorum is lost. recover rebuilds it through the manifests (moved out to stop a
// member, edited to start it), and every manifest ends clean.
func TestRecoverKubeadmStaticPods(t *testing.T) {
	etcd := []string{etcdtest.EtcdmedicBinary(t), "etcd"}
	root := t.TempDir()
	var ms []master
	for i := 1; i <= 3; i++ {
		ports := freePortsForTest(t, 2)
		dir := filepath.Join(root, fmt.Sprintf("master%d", i))
		os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
		ms = append(ms, master{name: fmt.Sprintf("master%d", i), manifest: filepath.Join(dir, "manifests", "etcd.yaml"), dataDir: filepath.Join(dir, "var-lib-etcd"),
			client: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[1])})
		killLocalMember(t, ms[i-1].dataDir)
	}
	initial := ""
	var cli *clientv3.Client
	for i, m := range ms {
		if initial != "" {
			initial += ","
		}
		initial += m.name + "=" + m.peer
		state := "new"
		var id uint64
		if i > 0 {
			state = "existing"
			resp, err := retryMemberAdd(t, cli, m.peer)
			if err != nil {
				t.Fatal(err)
			}
			id = resp.Member.ID
		}
		writeFile(t, m.manifest, kubeadmEtcdManifest(m.name, m.dataDir, m.client, m.peer, initial, state))
		startKubelet(t, m.manifest, etcd)
		if i == 0 {
			var err error
			if cli, err = clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cli.Close() })
			waitServing(t, m.client)
			continue
		}
		promoteWhenReady(t, cli, id)
	}
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, cli, etcdtest.LoadSpec{Rate: 40})
	waitAcked(t, ledger, 20)

	// master2's and master3's disks damage their WALs: their etcd exits at every start, kubelet
	// restarts it, and quorum is gone. (A member whose data is merely wiped can come back by
	// itself: the lone survivor wins its vote and sends it everything, so quorum returns.)
	for _, m := range ms[1:] {
		b, _ := os.ReadFile(m.manifest)
		os.Remove(m.manifest)
		waitStopped(t, m.dataDir)
		damageWAL(t, m.dataDir)
		writeFile(t, m.manifest, string(b))
	}
	waitDoctor(t, eps, func(d doctorJSON) bool { return d.find("quorum-lost") != nil })
	ledger.Stop()

	planDir, backups := filepath.Join(root, "plan"), filepath.Join(root, "backups")
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(eps, ","), "--command-timeout", "2s"}
	for _, m := range ms {
		args = append(args, "--data-dir", m.name+"="+m.dataDir, "--kubeadm-manifest", m.name+"="+m.manifest)
	}
	if code, out, errOut := runCLI(t, args...); code != exitOK || !strings.Contains(out, "SURVIVOR") {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
	code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor: exit %d %s", code, d.ids())
	}
	for _, m := range ms {
		b, err := os.ReadFile(m.manifest)
		if err != nil || strings.Contains(string(b), "force-new-cluster") || !strings.Contains(string(b), "image: registry.k8s.io/etcd:3.5.16-0") {
			t.Errorf("%s's manifest after recovery (%v):\n%s", m.name, err, b)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(m.manifest)), "etcdmedic-backup", "etcd.yaml")); err != nil {
			t.Errorf("%s: the original manifest was not backed up: %v", m.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	check, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	missing, err := etcdtest.MissingWrites(ctx, check, ledger.Acked())
	if err != nil || len(missing) != 0 {
		t.Fatalf("%d of %d acknowledged writes lost (%v)", len(missing), len(ledger.Acked()), err)
	}
}

func retryMemberAdd(t *testing.T, cli *clientv3.Client, peer string) (*clientv3.MemberAddResponse, error) {
	var err error
	for i := 0; i < 60; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		resp, e := cli.MemberAddAsLearner(ctx, []string{peer})
		cancel()
		if e == nil {
			return resp, nil
		}
		err = e
		time.Sleep(300 * time.Millisecond)
	}
	return nil, err
}

func promoteWhenReady(t *testing.T, cli *clientv3.Client, id uint64) {
	for i := 0; i < 150; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		_, err := cli.MemberPromote(ctx, id)
		cancel()
		if err == nil {
			return
		}
		cli.Put(t.Context(), "nudge", "x")
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("member %x not promoted", id)
}

// damageWAL destroys the newest WAL segment's records (its file is cut to zero bytes): etcd
// refuses to start on it, every time.
func damageWAL(t *testing.T, dataDir string) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "member", "wal", "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no WAL to damage")
	}
	if err := os.Truncate(segs[len(segs)-1], 0); err != nil {
		t.Fatal(err)
	}
}

// waitStopped waits until no etcd runs on dataDir (kubelet stops the pod).
func waitStopped(t *testing.T, dataDir string) {
	t.Helper()
	for i := 0; i < 150; i++ {
		if _, _, ok := local.FindProcess(dataDir); !ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcd on %s did not stop", dataDir)
}
