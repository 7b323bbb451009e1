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
	"github.com/etcdmedic/etcdmedic/kubeworkload"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

type master struct {
	name, manifest, dataDir, client, peer, metrics string
}

// Incident 2 as it happened: three kubeadm masters, etcd as static pods run by kubelet (a test
// double that runs real etcd from each manifest), each manifest as kubeadm wrote it with its
// own --initial-cluster (one, two, three entries). master3 is reset (kubeadm reset: manifest
// and etcd data gone) and a hand edit breaks master2's manifest: quorum is lost. recover
// rebuilds master1 and master2 through their manifests, and prints the kubeadm join
// --control-plane runbook for master3, which the operator (a double that runs what kubeadm
// join does for etcd) follows. Every manifest ends clean, nothing acknowledged is lost.
//
// Each master also runs a real kube-apiserver as a static pod on its own etcd, under a
// client-go workload with informers: after the repair all three are ready again, nothing any
// of them acknowledged is lost, resourceVersions never went back, and every informer's cache
// equals what etcd holds.
func TestRecoverKubeadmStaticPods(t *testing.T) {
	if etcdtest.RanEarly(t) {
		return
	}
	t.Parallel()
	root := t.TempDir()
	ms, cli := startKubeadmMasters(t, root)
	cp := startKubeadmAPIServers(t, root, ms)
	kube := cp.startWorkload(t)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, cli, etcdtest.LoadSpec{Rate: 40})
	waitAcked(t, ledger, 20)

	// master3 is reset: kubeadm reset removes the manifests (kubelet stops etcd and the
	// apiserver) and wipes the data.
	os.Remove(cp.manifest(ms[2]))
	os.Remove(ms[2].manifest)
	waitNoProcess(t, ms[2].dataDir)
	os.RemoveAll(ms[2].dataDir)
	// master2's manifest is broken by a hand edit: its etcd exits at every start.
	b2, _ := os.ReadFile(ms[1].manifest)
	writeFile(t, ms[1].manifest, strings.Replace(string(b2), "--initial-cluster-state=existing", "--initial-cluster-state=bogus", 1))
	// kubelet stops the running etcd first: with apiservers watching it, its graceful stop
	// takes seconds (it drains their watch streams), and it holds its data dir until it exits.
	waitNoProcess(t, ms[1].dataDir)
	waitDoctor(t, eps, func(d doctorJSON) bool { return d.find("quorum-lost") != nil })
	ledger.Stop()

	planDir, backups := filepath.Join(root, "plan"), filepath.Join(root, "backups")
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(eps, ","), "--command-timeout", "2s",
		"--kubeadm-manifest", "master1=" + ms[0].manifest, "--kubeadm-manifest", "master2=" + ms[1].manifest, "--kubeadm-join", "master3"}
	for _, m := range ms {
		args = append(args, "--data-dir", m.name+"="+m.dataDir)
	}
	if code, out, errOut := runCLI(t, args...); code != exitOK || !strings.Contains(out, "SURVIVOR") {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	op, transcript := applyWithOperator(t, planDir, func(node string) error {
		if err := kubeadmJoinsControlPlane(t.Context(), ms, ms[2]); err != nil {
			return err
		}
		cp.rejoin(t, ms[2])
		return nil
	})
	if !strings.Contains(strings.Join(op.commands, "\n"), "--control-plane --certificate-key") {
		t.Errorf("no kubeadm join --control-plane in the runbook:\n%s", transcript)
	}
	code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor: exit %d %s", code, d.ids())
	}
	for _, m := range ms {
		b, err := os.ReadFile(m.manifest)
		if err != nil || strings.Contains(string(b), "force-new-cluster") || strings.Contains(string(b), "bogus") || !strings.Contains(string(b), "image: registry.k8s.io/etcd:3.6.4-0") {
			t.Errorf("%s's manifest after recovery (%v):\n%s", m.name, err, b)
		}
	}
	for _, m := range ms[:2] {
		if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(m.manifest)), "etcdmedic-backup", "etcd.yaml")); err != nil {
			t.Errorf("%s: the original manifest was not backed up: %v", m.name, err)
		}
		if _, err := os.Stat(filepath.Join(backups, m.name, "static-pod", "etcd.yaml")); err != nil {
			t.Errorf("%s: the manifest is not in the recovery's backup: %v", m.name, err)
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
	cp.waitReady(t)
	v := kubeVerify(t, kube, eps, kubeworkload.VerifyOptions{InformerWait: 2 * time.Minute})
	t.Logf("Kubernetes: %s; informers: %+v", v, v.Informers)
	if !v.Passed || v.Counts.Acked == 0 {
		t.Fatalf("the Kubernetes workload after the repair: %s\n%+v", v, v.Violations)
	}
}

// startKubeadmMasters starts three kubeadm masters under root, etcd as static pods run by a
// kubelet double, each manifest as kubeadm wrote it, and returns them with a client.
func startKubeadmMasters(t *testing.T, root string) ([]master, *clientv3.Client) {
	etcd := []string{etcdtest.EtcdmedicBinary(t), "etcd"}
	var ms []master
	for i := 1; i <= 3; i++ {
		ports := freePortsForTest(t, 3)
		dir := filepath.Join(root, fmt.Sprintf("master%d", i))
		os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
		ms = append(ms, master{name: fmt.Sprintf("master%d", i), manifest: filepath.Join(dir, "manifests", "etcd.yaml"), dataDir: filepath.Join(dir, "var-lib-etcd"),
			client: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), metrics: fmt.Sprintf("http://127.0.0.1:%d", ports[2])})
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
		writeFile(t, m.manifest, kubeadmEtcdManifest(m.name, m.dataDir, m.client, m.peer, m.metrics, initial, state))
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
	return ms, cli
}

// kubeadmJoinsControlPlane does for etcd what kubeadm join --control-plane does on a reset
// master: add its etcd member as a learner, write its static pod manifest (the existing members
// and itself in --initial-cluster, state existing) for kubelet to start, promote it once it
// has caught up.
func kubeadmJoinsControlPlane(ctx context.Context, ms []master, m master) error {
	var eps []string
	for _, o := range ms {
		if o.name != m.name {
			eps = append(eps, o.client)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	var resp *clientv3.MemberAddResponse
	for i := 0; i < 100; i++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err = cli.MemberAddAsLearner(actx, []string{m.peer})
		cancel()
		if err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("member add: %w", err)
	}
	var initial []string
	for _, mem := range resp.Members {
		name := mem.Name
		if mem.ID == resp.Member.ID {
			name = m.name
		}
		for _, u := range mem.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	manifest := kubeadmEtcdManifest(m.name, m.dataDir, m.client, m.peer, m.metrics, strings.Join(initial, ","), "existing")
	if err := os.WriteFile(m.manifest, []byte(manifest), 0o600); err != nil {
		return err
	}
	for i := 0; i < 300; i++ {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.MemberPromote(pctx, resp.Member.ID)
		cancel()
		if err == nil {
			return nil
		}
		cli.Put(ctx, "kubeadm-join-nudge", "x")
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("promote %x: %w", resp.Member.ID, err)
}

// waitNoProcess waits until no etcd runs on dataDir.
func waitNoProcess(t *testing.T, dataDir string) {
	t.Helper()
	for i := 0; i < 150; i++ {
		if _, _, ok := local.FindProcess(dataDir); !ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcd still runs on %s", dataDir)
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
