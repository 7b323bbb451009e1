package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/deployment"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/scan"
)

// shape is one way operators run a member: how it is started, and how etcdmedic is told about
// it instead of a data dir.
type shape struct {
	name    string
	dir     string // the member's working directory
	argv    []string
	env     []string
	shell   string // started by bash -c, as systemd would from a unit (its EnvironmentFile sourced)
	source  func() (deployment.Spec, error)
	flag    []string // how inspect is told
	dataDir string
	walDir  string
	member  string
}

// Each deployment shape runs a real etcd started that way. The spec read from the running
// process and the one read from its configuration (file, unit, PD TOML) must both be the member
// etcd runs: its name, data dir, WAL dir and URLs. Stopped, inspect reads it through the same
// configuration, both halves when the WAL lives apart.
func TestDeploymentShapesResolveToTheMemberEtcdRuns(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	for _, mk := range []func(t *testing.T, bin string) shape{configFileShape, environmentShape, walDirFlagShape, unitShape, pdShape} {
		s := mk(t, bin)
		t.Run(s.name, func(t *testing.T) {
			pid, client := startShape(t, s)
			fromProcess, err := deployment.FromProcess(pid)
			if err != nil {
				t.Fatal(err)
			}
			fromConfig, err := s.source()
			if err != nil {
				t.Fatal(err)
			}
			for what, got := range map[string]deployment.Spec{"the process": fromProcess, "its configuration": fromConfig} {
				if got.Name != s.member || got.DataDir != s.dataDir || got.WALDir != s.walDir || strings.Join(got.ClientURLs, ",") != client {
					t.Errorf("from %s: name %q data dir %q WAL dir %q client URLs %v; etcd runs %q %q %q %s (origins %v)",
						what, got.Name, got.DataDir, got.WALDir, got.ClientURLs, s.member, s.dataDir, s.walDir, client, got.Origins)
				}
			}
			if fromProcess.Runs.PID != pid {
				t.Errorf("runs: %+v", fromProcess.Runs)
			}
			writeKeys(t, fromProcess.ClientURLs, 20)
			// scan names the process that uses each data dir, and its WAL dir.
			code, out, errOut := runCLI(t, "scan", filepath.Dir(s.dataDir), "-w", "json")
			var sr scan.Result
			if err := json.Unmarshal([]byte(out), &sr); err != nil {
				t.Fatalf("scan: exit %d %v\n%s\n%s", code, err, out, errOut)
			}
			var seen bool
			for _, f := range sr.Found {
				if f.Path == s.dataDir {
					seen = f.UsedBy != nil && f.UsedBy.PID == pid && f.WALDir == s.walDir
				}
			}
			if !seen {
				t.Errorf("scan %s: want %s used by pid %d with WAL dir %q: %s", filepath.Dir(s.dataDir), s.dataDir, pid, s.walDir, out)
			}
			// Running: its files are locked, so inspect reads it through a live copy.
			code, out, errOut = runCLI(t, "inspect", "--from-process", fmt.Sprint(pid), "--live-endpoint", client, "-w", "json")
			if code > exitFindings {
				t.Fatalf("inspect --from-process of the running member: exit %d\n%s\n%s", code, out, errOut)
			}
			stopShape(t, pid)
			code, out, errOut = runCLI(t, append([]string{"inspect", "-w", "json"}, s.flag...)...)
			if code > exitFindings {
				t.Fatalf("inspect %v of the stopped member: exit %d\n%s\n%s", s.flag, code, out, errOut)
			}
			var res inspectResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.Identity == nil || res.Identity.Name != s.member || res.Raft == nil || res.Raft.LastIndex < 20 || res.Backend == nil {
				t.Fatalf("inspect %v: %s", s.flag, out)
			}
			if s.walDir != "" {
				if res.WALDir != s.walDir {
					t.Errorf("WAL read from %s, want %s", res.WALDir, s.walDir)
				}
				// Given the data dir alone, the WAL is missing: a finding, not a guess.
				code, out, _ := runCLI(t, "inspect", s.dataDir, "-w", "json")
				if code != exitCritical || !strings.Contains(out, finding.IDDataWithoutWAL) {
					t.Errorf("inspect of the data dir without its WAL dir: exit %d %s", code, out)
				}
				code, out, _ = runCLI(t, "inspect", t.TempDir(), "--wal-dir", s.walDir, "-w", "json")
				if code != exitCritical || !strings.Contains(out, finding.IDWALWithoutData) {
					t.Errorf("inspect of the WAL dir with another data dir: exit %d %s", code, out)
				}
			}
		})
	}
}

func configFileShape(t *testing.T, bin string) shape {
	dir := t.TempDir()
	client, peer := newURLs(t)
	data, wal := filepath.Join(dir, "data"), filepath.Join(t.TempDir(), "wal-disk", "etcd")
	config := filepath.Join(dir, "etcd.conf.yml")
	writeFile(t, config, fmt.Sprintf("name: cfg1\ndata-dir: %s\nwal-dir: %s\nlisten-client-urls: %s\nadvertise-client-urls: %s\nlisten-peer-urls: %s\ninitial-advertise-peer-urls: %s\ninitial-cluster: cfg1=%s\n",
		data, wal, client, client, peer, peer, peer))
	return shape{name: "etcd config file, WAL on another directory", dir: dir, argv: []string{bin, "etcd", "--config-file", config},
		source: func() (deployment.Spec, error) { return deployment.FromConfigFile(config) }, flag: []string{"--from-config", config},
		dataDir: data, walDir: wal, member: "cfg1"}
}

func environmentShape(t *testing.T, bin string) shape {
	dir := t.TempDir()
	client, peer := newURLs(t)
	env := []string{"ETCD_NAME=env1", "ETCD_DATA_DIR=env1.etcd", "ETCD_LISTEN_CLIENT_URLS=" + client, "ETCD_ADVERTISE_CLIENT_URLS=" + client,
		"ETCD_LISTEN_PEER_URLS=" + peer, "ETCD_INITIAL_ADVERTISE_PEER_URLS=" + peer, "ETCD_INITIAL_CLUSTER=env1=" + peer}
	envFile := filepath.Join(t.TempDir(), "etcd.env")
	writeFile(t, envFile, strings.Join(env, "\n")+"\n")
	return shape{name: "ETCD_* variables only, a relative data dir", dir: dir, argv: []string{bin, "etcd"}, env: env,
		source: func() (deployment.Spec, error) {
			return deployment.FromCommand([]string{bin, "etcd"}, deployment.EnvironmentOf(env, dir))
		},
		flag: []string{filepath.Join(dir, "env1.etcd")}, dataDir: filepath.Join(dir, "env1.etcd"), member: "env1"}
}

func walDirFlagShape(t *testing.T, bin string) shape {
	dir := t.TempDir()
	client, peer := newURLs(t)
	data, wal := filepath.Join(dir, "m1"), filepath.Join(t.TempDir(), "fast-disk")
	argv := []string{bin, "etcd", "--name", "flag1", "--data-dir", data, "--wal-dir=" + wal, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "flag1=" + peer}
	return shape{name: "flags, --wal-dir on another directory", dir: dir, argv: argv,
		source: func() (deployment.Spec, error) {
			return deployment.FromCommand(argv, deployment.EnvironmentOf(nil, dir))
		},
		flag: []string{data, "--wal-dir", wal}, dataDir: data, walDir: wal, member: "flag1"}
}

func unitShape(t *testing.T, bin string) shape {
	dir := t.TempDir()
	client, peer := newURLs(t)
	wal := filepath.Join(t.TempDir(), "wal")
	envFile := filepath.Join(t.TempDir(), "etcd.conf")
	writeFile(t, envFile, fmt.Sprintf("# as /etc/etcd/etcd.conf\nETCD_NAME=\"unit1\"\nETCD_DATA_DIR=\"default.etcd\"\nETCD_WAL_DIR=%s\nETCD_LISTEN_CLIENT_URLS=\"%s\"\nETCD_ADVERTISE_CLIENT_URLS=\"%s\"\nETCD_LISTEN_PEER_URLS=%s\nETCD_INITIAL_ADVERTISE_PEER_URLS=%s\nETCD_INITIAL_CLUSTER=\"unit1=%s\"\n",
		wal, client, client, peer, peer, peer))
	unit := filepath.Join(t.TempDir(), "etcd-unit1.service")
	writeFile(t, unit, fmt.Sprintf("[Unit]\nDescription=etcd\n\n[Service]\nType=notify\nWorkingDirectory=%s\nEnvironmentFile=-%s\nExecStart=%s etcd\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n", dir, envFile, bin))
	return shape{name: "systemd unit with an EnvironmentFile", dir: dir,
		shell:  fmt.Sprintf("set -a; . %s; set +a; exec %s etcd", envFile, bin),
		source: func() (deployment.Spec, error) { return deployment.FromUnit(unit) }, flag: []string{"--from-unit", unit},
		dataDir: filepath.Join(dir, "default.etcd"), walDir: wal, member: "unit1"}
}

// PD embeds etcd: its data-dir holds etcd's member/ folder. A real etcd stands in for
// pd-server, run on the data dir and URLs the PD config names.
func pdShape(t *testing.T, bin string) shape {
	dir := t.TempDir()
	client, peer := newURLs(t)
	toml := filepath.Join(dir, "pd.toml")
	writeFile(t, toml, fmt.Sprintf("name = \"pd-0\"\ndata-dir = \"pd-data\"\nclient-urls = \"%s\"\npeer-urls = \"%s\"\ninitial-cluster = \"pd-0=%s\"\n\n[security]\ncacert-path = \"\"\n", client, peer, peer))
	data := filepath.Join(dir, "pd-data")
	argv := []string{bin, "etcd", "--name", "pd-0", "--data-dir", data, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "pd-0=" + peer}
	return shape{name: "TiDB PD TOML", dir: dir, argv: argv,
		source: func() (deployment.Spec, error) { return deployment.FromPDConfig(toml) }, flag: []string{"--from-config", toml},
		dataDir: data, member: "pd-0"}
}

// startShape starts the member as its shape says and waits until it takes a write; it returns
// etcd's pid and client URL.
func startShape(t *testing.T, s shape) (int, string) {
	t.Helper()
	var cmd *exec.Cmd
	if s.shell != "" {
		cmd = exec.Command("bash", "-c", s.shell)
	} else {
		cmd = exec.Command(s.argv[0], s.argv[1:]...)
	}
	cmd.Dir = s.dir
	cmd.Env = append(etcdFreeEnvForTest(), s.env...)
	log, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	startGroup(t, cmd)
	spec, err := deployment.FromProcess(cmd.Process.Pid)
	for i := 0; i < 100 && err != nil; i++ {
		time.Sleep(50 * time.Millisecond) // bash has not exec'd etcd yet
		spec, err = deployment.FromProcess(cmd.Process.Pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, spec.ClientURLs, 1)
	return cmd.Process.Pid, strings.Join(spec.ClientURLs, ",")
}

func stopShape(t *testing.T, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGTERM)
	waitFor(t, fmt.Sprintf("etcd (pid %d) to stop", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}

func writeKeys(t *testing.T, endpoints []string, n int) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; i < n; i++ {
		var err error
		for try := 0; try < 40; try++ {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			_, err = cli.Put(ctx, fmt.Sprintf("shape/%d", i), "v")
			cancel()
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("write to %v: %v", endpoints, err)
		}
	}
}

// A stale member, run in each deployment shape, is judged by guard through that shape and
// quarantined whole: a WAL on its own disk (--wal-dir) beside that disk's folder, the data dir's
// contents beside the data dir, one manifest with every file's checksum. Given without its WAL
// dir, a member whose WAL lives apart is INCOMPLETE and nothing moves.
func TestGuardQuarantinesEachShapeWhole(t *testing.T) {
	t.Parallel()
	live := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	bin := etcdtest.EtcdmedicBinary(t)
	for _, mk := range []func(t *testing.T, bin string) shape{configFileShape, environmentShape, walDirFlagShape, unitShape, pdShape} {
		old := mk(t, bin) // another cluster's member: FOREIGN
		t.Run(old.name, func(t *testing.T) {
			pid, _ := startShape(t, old)
			writeKeys(t, []string{mustClientURL(t, pid)}, 30)
			stopShape(t, pid)
			halves := []string{old.dataDir}
			if old.walDir != "" {
				halves = append(halves, old.walDir)
			}
			before := map[string]string{}
			for _, dir := range halves {
				for rel, sum := range treeSums(t, dir) {
					before[filepath.Join(dir, rel)] = sum
				}
			}
			if old.walDir != "" {
				code, g, errOut := runGuard(t, "--data-dir", old.dataDir, "--endpoints", strings.Join(live.Endpoints(), ","), "--fix")
				if code != exitCritical || g.Verdict.Class != guard.Incomplete || g.Quarantined != nil {
					t.Fatalf("guard of the data dir without its WAL dir: exit %d %+v %s", code, g, errOut)
				}
			}
			// The member is added to the live cluster first: only then are its endpoints proven
			// to be the member's cluster, and another cluster's data moved.
			spec, err := old.source()
			if err != nil {
				t.Fatal(err)
			}
			added := addLearner(t, live.Client(t), spec.PeerURLs...)
			defer live.Client(t).MemberRemove(context.Background(), added.Member.ID) // one learner at a time
			args := old.flag
			if !strings.HasPrefix(args[0], "--") {
				args = append([]string{"--data-dir"}, args...)
				args = append(args, "--peer-urls", strings.Join(spec.PeerURLs, ","))
			}
			// Without --fix guard prints the command that quarantines: it must work when copied
			// (the --from-* form or --wal-dir kept), so that is what runs.
			code, g, errOut := runGuard(t, append(args, "--endpoints", strings.Join(live.Endpoints(), ","))...)
			if code != exitCritical || g.Verdict.Class != guard.Foreign {
				t.Fatalf("guard %v of another cluster's member: exit %d %+v %s", args, code, g, errOut)
			}
			code, g, errOut = runGuard(t, printedGuardCommand(t, g.Next)...)
			if code != exitOK || g.Verdict.Class != guard.Foreign || g.Quarantined == nil || (old.walDir != "") != (g.Quarantined.WALDir != "") {
				t.Fatalf("guard %v --fix of another cluster's member: exit %d %+v %s", args, code, g, errOut)
			}
			for _, dir := range halves {
				if left := treeSums(t, dir); len(left) != 0 {
					t.Errorf("%s still holds %v", dir, left)
				}
			}
			if err := guard.Verify(g.Quarantined.Dir); err != nil {
				t.Fatal(err)
			}
			after := map[string]string{}
			for rel, sum := range treeSums(t, filepath.Join(g.Quarantined.Dir, "data")) {
				after[filepath.Join(old.dataDir, rel)] = sum
			}
			if old.walDir != "" {
				if filepath.Dir(filepath.Dir(g.Quarantined.WALDir)) != filepath.Dir(old.walDir) {
					t.Errorf("the WAL went to %s, not beside %s", g.Quarantined.WALDir, old.walDir)
				}
				for rel, sum := range treeSums(t, filepath.Join(g.Quarantined.WALDir, "wal")) {
					after[filepath.Join(old.walDir, rel)] = sum
				}
			}
			for path, sum := range before {
				if after[path] != sum {
					t.Errorf("%s: %q before, %q in quarantine", path, sum, after[path])
				}
			}
		})
	}
}

func mustClientURL(t *testing.T, pid int) string {
	t.Helper()
	s, err := deployment.FromProcess(pid)
	if err != nil || len(s.ClientURLs) == 0 {
		t.Fatalf("process %d: %v", pid, err)
	}
	return s.ClientURLs[0]
}

// treeSums are the sha256 of every regular file under dir, by relative path.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums, _, err := backup.Checksum(dir, datadir.Ignorable)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range sums {
		out[f.Path] = f.SHA256
	}
	return out
}

// walApartCluster is three members run from etcd config files by bin, each with its WAL on
// another directory, under a write load.
type walApartCluster struct {
	names                               []string
	root                                string
	clients, configs, walDirs, dataDirs map[string]string
	units                               map[string]string // unit name -> pid file (the unit shape)
	pids                                map[string]int
	eps                                 []string
	cli                                 *clientv3.Client
}

func startWALApartCluster(t *testing.T, bin ...string) *walApartCluster {
	t.Helper()
	return startWALApart(t, byConfigFile, bin...)
}

// How the three members are run.
const (
	byConfigFile  = "config file"            // etcd --config-file, the WAL apart
	byEnvironment = "ETCD_* variables"       // ETCD_* only, the WAL apart
	byUnit        = "systemd unit"           // a unit with an EnvironmentFile, run as systemd would
	byPDConfig    = "PD config (etcd flags)" // a PD TOML names the data dir (no WAL dir)
)

// startWALApart starts the three members the way mode says.
func startWALApart(t *testing.T, mode string, bin ...string) *walApartCluster {
	t.Helper()
	c := &walApartCluster{names: []string{"m1", "m2", "m3"}, root: t.TempDir(), clients: map[string]string{}, configs: map[string]string{},
		walDirs: map[string]string{}, dataDirs: map[string]string{}, units: map[string]string{}, pids: map[string]int{}}
	peers := map[string]string{}
	var initial []string
	for _, n := range c.names {
		c.clients[n], peers[n] = newURLs(t)
		initial = append(initial, n+"="+peers[n])
		c.eps = append(c.eps, c.clients[n])
	}
	for _, n := range c.names {
		c.walDirs[n] = filepath.Join(t.TempDir(), "wal-disk", n)
		if mode == byPDConfig {
			c.walDirs[n] = ""
		}
		c.dataDirs[n] = filepath.Join(c.root, n)
		c.configs[n] = filepath.Join(c.root, n+".conf.yml")
		writeFile(t, c.configs[n], fmt.Sprintf("name: %s\ndata-dir: %s\nwal-dir: %s\nlisten-client-urls: %s\nadvertise-client-urls: %s\nlisten-peer-urls: %s\ninitial-advertise-peer-urls: %s\ninitial-cluster: %s\ninitial-cluster-token: walapart\n",
			n, c.dataDirs[n], c.walDirs[n], c.clients[n], c.clients[n], peers[n], peers[n], strings.Join(initial, ",")))
	}
	for _, n := range c.names {
		env := []string{"ETCD_NAME=" + n, "ETCD_DATA_DIR=" + c.dataDirs[n], "ETCD_WAL_DIR=" + c.walDirs[n],
			"ETCD_LISTEN_CLIENT_URLS=" + c.clients[n], "ETCD_ADVERTISE_CLIENT_URLS=" + c.clients[n], "ETCD_LISTEN_PEER_URLS=" + peers[n],
			"ETCD_INITIAL_ADVERTISE_PEER_URLS=" + peers[n], "ETCD_INITIAL_CLUSTER=" + strings.Join(initial, ","), "ETCD_INITIAL_CLUSTER_TOKEN=walapart"}
		cmd := exec.Command(bin[0], append(bin[1:], "--config-file", c.configs[n])...)
		cmd.Env = etcdFreeEnvForTest()
		switch mode {
		case byEnvironment:
			cmd = exec.Command(bin[0], bin[1:]...)
			cmd.Env = append(etcdFreeEnvForTest(), env...)
		case byUnit:
			// The unit and its EnvironmentFile, and the member started as systemd would: the
			// file's variables exported, ExecStart exec'd, in its own process group (the
			// systemctl double stops the group whose leader's pid is in the unit's pid file).
			envFile, unit := filepath.Join(c.root, n+".env"), filepath.Join(c.root, "etcd-"+n+".service")
			writeFile(t, envFile, strings.Join(env, "\n")+"\n")
			writeFile(t, unit, fmt.Sprintf("[Service]\nType=notify\nEnvironmentFile=%s\nExecStart=%s\nRestart=always\n", envFile, strings.Join(bin, " ")))
			c.configs[n], c.units["etcd-"+n+".service"] = unit, filepath.Join(c.root, n+".unit.pid")
			cmd = exec.Command("bash", "-c", fmt.Sprintf("echo $$ > %s; set -a; . %s; set +a; exec %s", c.units["etcd-"+n+".service"], envFile, strings.Join(bin, " ")))
			cmd.Env = etcdFreeEnvForTest()
		case byPDConfig:
			toml := filepath.Join(c.root, n+".toml")
			writeFile(t, toml, fmt.Sprintf("name = %q\ndata-dir = %q\nclient-urls = %q\npeer-urls = %q\ninitial-cluster = %q\n", n, c.dataDirs[n], c.clients[n], peers[n], strings.Join(initial, ",")))
			c.configs[n] = toml
			cmd = exec.Command(bin[0], append(bin[1:], "--name", n, "--data-dir", c.dataDirs[n], "--listen-client-urls", c.clients[n], "--advertise-client-urls", c.clients[n],
				"--listen-peer-urls", peers[n], "--initial-advertise-peer-urls", peers[n], "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "walapart")...)
			cmd.Env = etcdFreeEnvForTest()
		}
		log, err := os.Create(filepath.Join(c.root, n+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.pids[n] = cmd.Process.Pid
		go cmd.Wait()
	}
	t.Cleanup(func() { etcdtest.KillUnder(c.root) })
	writeKeys(t, c.eps, 1)
	var err error
	if c.cli, err = clientv3.New(clientv3.Config{Endpoints: c.eps, DialTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cli.Close() })
	return c
}

// loseQuorum kills m3 then m2; m1 runs on without quorum.
func (c *walApartCluster) loseQuorum() {
	syscall.Kill(c.pids["m3"], syscall.SIGKILL)
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(c.pids["m2"], syscall.SIGKILL)
	time.Sleep(300 * time.Millisecond)
}

// fromConfigFiles names every member by its config file (or its unit, with flag --from-unit).
func (c *walApartCluster) fromConfigFiles(flag ...string) []string {
	var args []string
	for _, n := range c.names {
		args = append(args, append(flag, "--from-config")[0], n+"="+c.configs[n])
	}
	return args
}

// recover runs recover plan (members named by members) and apply.
func (c *walApartCluster) recover(t *testing.T, etcdCommand string, members []string, extra ...string) {
	t.Helper()
	c.recoverWith(t, runCLI, etcdCommand, members, extra...)
}

func (c *walApartCluster) recoverWith(t *testing.T, runCLI cliFunc, etcdCommand string, members []string, extra ...string) {
	t.Helper()
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := append([]string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(c.eps, ","),
		"--command-timeout", "2s", "--etcd-command", etcdCommand, "--etcd-flag=--initial-cluster-token=walapart"}, members...)
	if code, out, errOut := runCLI(t, append(args, extra...)...); code != exitOK {
		t.Fatalf("recover plan --from-config: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, n := range c.names {
		killLocalMember(t, c.dataDirs[n]) // recover runs them as its own processes now
	}
	code, d := waitDoctor(t, c.eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor after recovery: exit %d %s", code, d.ids())
	}
	if c.walDirs["m1"] == "" {
		return // the WAL in member/wal
	}
	// Every member runs with its WAL apart again: the log is in its WAL dir, not its data dir.
	for _, n := range c.names {
		if segs, _ := filepath.Glob(filepath.Join(c.walDirs[n], "*.wal")); len(segs) == 0 {
			t.Errorf("%s has no WAL segments in its WAL dir %s after the recovery", n, c.walDirs[n])
		}
		if _, err := os.Stat(filepath.Join(c.dataDirs[n], "member", "wal")); err == nil {
			t.Errorf("%s wrote a WAL into its data dir: it was started without its --wal-dir", n)
		}
	}
	// The two members that rejoined (whichever the survivor was; a restore from a snapshot
	// quarantines the survivor's too) have their old logs quarantined beside their WAL dirs.
	var quarantined []string
	for _, n := range c.names {
		if q, _ := filepath.Glob(filepath.Join(c.walDirs[n]+datadir.QuarantineFolder, "*", "wal", "*.wal")); len(q) > 0 {
			quarantined = append(quarantined, n)
		}
	}
	if len(quarantined) < 2 {
		t.Errorf("old WALs quarantined beside the WAL dirs of %v, want at least the two members that rejoined", quarantined)
	}
}

// Incident 2 on members run from etcd config files, each with its WAL on another directory:
// two killed, the third left running without quorum. recover reads each member from its
// config file (--from-config), stops the running one, backs up and quarantines both halves of
// every member, and starts each with its --wal-dir again. Nothing acknowledged is lost.
func TestRecoverMembersRunFromConfigFilesWithTheirWALApart(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	c := startWALApartCluster(t, bin, "etcd")
	ledger := etcdtest.StartLoad(t.Context(), t, c.cli, etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	c.loseQuorum()
	ledger.Stop()
	c.recover(t, bin+" etcd", c.fromConfigFiles())
	nothingLost(t, c.eps, ledger)
}

// The same with members configured by ETCD_* variables only (distro units): the one still
// running is read from its process (--from-process), the two killed are given by hand, each
// with its --wal-dir.
func TestRecoverMembersRunFromEnvironmentWithTheirWALApart(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	c := startWALApart(t, byEnvironment, bin, "etcd")
	ledger := etcdtest.StartLoad(t.Context(), t, c.cli, etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	c.loseQuorum()
	ledger.Stop()
	members := []string{"--from-process", fmt.Sprintf("m1=%d", c.pids["m1"])}
	for _, n := range []string{"m2", "m3"} {
		members = append(members, "--data-dir", n+"="+c.dataDirs[n], "--wal-dir", n+"="+c.walDirs[n])
	}
	c.recover(t, bin+" etcd", members)
	nothingLost(t, c.eps, ledger)
}

// The same members rebuilt from a snapshot (recover --from-snapshot): etcdutl restores the WAL
// beside the survivor's WAL dir and it is moved in, so the restored member runs with its WAL
// apart too; everything the snapshot holds is there.
func TestRecoverFromSnapshotOntoMembersWithTheirWALApart(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Binary(t, version).Path
	c := startWALApartCluster(t, etcd)
	writeKeys(t, c.eps, 30)
	snapFile := filepath.Join(t.TempDir(), "nightly.db")
	m1, err := clientv3.New(clientv3.Config{Endpoints: []string{c.clients["m1"]}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	writeKeys(t, []string{c.clients["m1"]}, 30) // through m1: it has applied them all
	saveSnapshot(t, m1, snapFile)
	c.loseQuorum()
	c.recover(t, etcd, c.fromConfigFiles(), "--from-snapshot", snapFile, "--etcdutl", etcdutl, "--bump-revision", "1000", "--mark-compacted")
	resp, err := c.cli.Get(t.Context(), "shape/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 30 {
		t.Fatalf("after the restore: %v keys, want the snapshot's 30 (%v)", resp, err)
	}
}

// member replace onto a node whose data dir and WAL disk still hold another cluster's member
// (a reused volume, incident 1, with the WAL on its own disk): both halves are quarantined, and
// the new member, read from its config file, starts with its --wal-dir. A WAL dir left behind
// without its data dir is refused: etcd would replay it.
func TestMemberReplaceGuardsBothHalvesOfTheNewMember(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 50})
	waitAcked(t, ledger, 20)
	c.Member("m3").Kill()
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m2").ClientURL}, ",")
	stale := walDirFlagShape(t, etcdtest.EtcdmedicBinary(t)) // another cluster's member, WAL apart
	pid, _ := startShape(t, stale)
	stopShape(t, pid)

	client, peer := newURLs(t)
	orphan := filepath.Join(t.TempDir(), "wal")
	if err := os.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(orphan, "0000000000000000-0000000000000000.wal"), "old log")
	code, _, errOut := runCLI(t, "member", "replace", "m3", "--name", "m4", "--peer-urls", peer, "--client-urls", client,
		"--data-dir", filepath.Join(t.TempDir(), "missing"), "--wal-dir", orphan, "--backup-dir", t.TempDir(), "--endpoints", eps)
	if code != exitCritical || !strings.Contains(errOut, "replay that old log") {
		t.Fatalf("replace onto a WAL dir left behind: exit %d %s", code, errOut)
	}

	// The new member is given as its config file says it will run (name, URLs, both dirs).
	config := filepath.Join(t.TempDir(), "m4.conf.yml")
	writeFile(t, config, fmt.Sprintf("name: m4\ndata-dir: %s\nwal-dir: %s\nadvertise-client-urls: %s\nlisten-client-urls: %s\ninitial-advertise-peer-urls: %s\nlisten-peer-urls: %s\n",
		stale.dataDir, stale.walDir, client, client, peer, peer))
	killLocalMember(t, stale.dataDir)
	code, out, errOut := runCLI(t, "member", "replace", "m3", "--from-config", config,
		"--backup-dir", t.TempDir(), "--start", "--etcd-command", etcdmedicEtcd(t), "--endpoints", eps, "-w", "json")
	if code != exitOK {
		t.Fatalf("replace onto a stale member with its WAL apart: exit %d\n%s\n%s", code, out, errOut)
	}
	var res member.Replaced
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Quarantined == nil || res.Quarantined.WALDir == "" || !res.Joined.Promoted {
		t.Fatalf("replace result: %+v", res)
	}
	if !slices.Contains(res.Joined.Start.ExtraFlags, "--wal-dir="+stale.walDir) {
		t.Errorf("the new member started without its --wal-dir: %v", res.Joined.Start.Flags())
	}
	if segs, _ := filepath.Glob(filepath.Join(stale.walDir, "*.wal")); len(segs) == 0 {
		t.Errorf("the new member wrote no WAL in its WAL dir %s", stale.walDir)
	}
	ledger.Stop()
	nothingLost(t, strings.Split(eps, ","), ledger)
}

// A rolling upgrade (v3.5.24 to v3.6.16) of members run from config files with their WAL
// apart (one given with --data-dir and --wal-dir, two with --from-config): every member is
// restarted on the new binary with its --wal-dir, nothing lost.
func TestUpgradeMembersWithTheirWALApart(t *testing.T) {
	t.Parallel()
	c := startWALApartCluster(t, etcdtest.Binary(t, etcdtest.V3_5_24).Path)
	ledger := etcdtest.StartLoad(t.Context(), t, c.cli, etcdtest.LoadSpec{Rate: 50})
	waitAcked(t, ledger, 20)
	planDir := filepath.Join(t.TempDir(), "plan")
	args := []string{"upgrade", "plan", "--to", "v3.6.16", "--plan-dir", planDir, "--backup-dir", filepath.Join(t.TempDir(), "backups"),
		"--etcd-binary", etcdtest.V3_5_24 + "=" + etcdtest.Binary(t, etcdtest.V3_5_24).Path, "--etcd-binary", etcdtest.V3_6 + "=" + etcdtest.Binary(t, etcdtest.V3_6).Path,
		"--etcd-flag=--initial-cluster-token=walapart", "--endpoints", strings.Join(c.eps, ",")}
	for i, n := range c.names {
		if i == 0 {
			args = append(args, "--data-dir", n+"="+c.dataDirs[n], "--wal-dir", n+"="+c.walDirs[n])
		} else {
			args = append(args, "--from-config", n+"="+c.configs[n]) // both dirs from its config file
		}
		killLocalMember(t, c.dataDirs[n]) // the upgrade runs them as its own processes
	}
	if code, out, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("upgrade plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("upgrade apply: exit %d\n%s\n%s", code, out, errOut)
	}
	_, rep := upgradeCheck(t, "--to", "v3.7.3", "--endpoints", strings.Join(c.eps, ","))
	for _, m := range rep.Members {
		if m.Version != "3.6.16" {
			t.Errorf("%s runs %s after the upgrade", m.Name, m.Version)
		}
	}
	for _, n := range c.names {
		if _, err := os.Stat(filepath.Join(c.dataDirs[n], "member", "wal")); err == nil {
			t.Errorf("%s wrote a WAL into its data dir: it was restarted without its --wal-dir", n)
		}
	}
	ledger.Stop()
	nothingLost(t, c.eps, ledger)
}

// The members run by systemd units whose settings are in an EnvironmentFile, and by a PD
// config: each is named by its unit (--from-unit, which also stops the running one with
// systemctl stop) or its PD TOML (--from-config pd.toml). Nothing lost either way.
func TestRecoverMembersRunByUnitsAndPDConfigs(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	for _, mode := range []string{byUnit, byPDConfig} {
		t.Run(mode, func(t *testing.T) {
			c := startWALApart(t, mode, bin, "etcd")
			ledger := etcdtest.StartLoad(t.Context(), t, c.cli, etcdtest.LoadSpec{Rate: 80})
			waitAcked(t, ledger, 40)
			c.loseQuorum()
			ledger.Stop()
			members, cli := c.fromConfigFiles(), runCLI
			if mode == byUnit {
				cli = systemctlDouble(t, c.units).run
				members = c.fromConfigFiles("--from-unit")
			}
			c.recoverWith(t, cli, bin+" etcd", members)
			nothingLost(t, c.eps, ledger)
		})
	}
}
