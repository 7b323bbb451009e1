package deployment

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Each row is a member run one way; the spec is what etcd itself would run with.
func TestFromCommandFollowsEtcdsRules(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "etcd.conf.yml")
	writeFile(t, config, `
name: m1
data-dir: /var/lib/etcd
wal-dir: /mnt/wal/etcd
initial-advertise-peer-urls: https://10.0.0.1:2380
advertise-client-urls: https://10.0.0.1:2379,https://127.0.0.1:2379
client-transport-security:
  cert-file: /etc/etcd/server.crt
  key-file: /etc/etcd/server.key
  trusted-ca-file: /etc/etcd/ca.crt
  client-cert-auth: true
peer-transport-security:
  cert-file: peer.crt
`)
	for _, tc := range []struct {
		situation string
		argv      []string
		env       []string
		want      Spec
		origin    map[string]string
	}{
		{
			situation: "flags only, both forms",
			argv:      []string{"/usr/local/bin/etcd", "--name", "m1", "--data-dir=/var/lib/etcd", "-wal-dir", "/wal", "--client-cert-auth", "--advertise-client-urls=http://a:2379"},
			want:      Spec{Server: "etcd", Name: "m1", DataDir: "/var/lib/etcd", WALDir: "/wal", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://a:2379"}, ClientTLS: TLS{ClientCertAuth: true}},
			origin:    map[string]string{"data-dir": "flag --data-dir", "initial-advertise-peer-urls": "default"},
		},
		{
			situation: "environment only, as distro units run it",
			argv:      []string{"/usr/bin/etcd"},
			env:       []string{"ETCD_NAME=node-a", "ETCD_DATA_DIR=/var/lib/etcd/default", "ETCD_WAL_DIR=/ssd/wal", "PATH=/usr/bin"},
			want:      Spec{Server: "etcd", Name: "node-a", DataDir: "/var/lib/etcd/default", WALDir: "/ssd/wal", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			origin:    map[string]string{"name": "ETCD_NAME", "wal-dir": "ETCD_WAL_DIR"},
		},
		{
			situation: "a flag and another setting's variable",
			argv:      []string{"etcd", "--data-dir", "/flag"},
			env:       []string{"ETCD_NAME=m3"},
			want:      Spec{Server: "etcd", Name: "m3", DataDir: "/flag", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			origin:    map[string]string{"data-dir": "flag --data-dir", "name": "ETCD_NAME"},
		},
		{
			situation: "a flag and its variable under a config file: etcd reads the file only",
			argv:      []string{"etcd", "--config-file", config, "--data-dir", "/ignored"},
			env:       []string{"ETCD_DATA_DIR=/ignored-too"},
			want: Spec{Server: "etcd", Name: "m1", DataDir: "/var/lib/etcd", WALDir: "/mnt/wal/etcd", ConfigFile: config,
				PeerURLs: []string{"https://10.0.0.1:2380"}, ClientURLs: []string{"https://10.0.0.1:2379", "https://127.0.0.1:2379"},
				ClientTLS: TLS{CertFile: "/etc/etcd/server.crt", KeyFile: "/etc/etcd/server.key", TrustedCAFile: "/etc/etcd/ca.crt", ClientCertAuth: true},
				PeerTLS:   TLS{CertFile: "/srv/peer.crt"}},
		},
		{
			situation: "empty variables are unset, as etcd skips them (a templated env file)",
			argv:      []string{"/usr/bin/etcd"},
			env:       []string{"ETCD_NAME=", "ETCD_ADVERTISE_CLIENT_URLS=", "ETCD_DATA_DIR=", "ETCD_CONFIG_FILE="},
			want:      Spec{Server: "etcd", Name: "default", DataDir: "/srv/default.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			origin:    map[string]string{"name": "default", "advertise-client-urls": "default", "data-dir": "default (<name>.etcd)"},
		},
		{
			situation: "nothing set: <name>.etcd under the working directory",
			argv:      []string{"etcd", "--name", "infra0"},
			want:      Spec{Server: "etcd", Name: "infra0", DataDir: "/srv/infra0.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
		},
		{
			situation: "a config file replaces every flag and variable",
			argv:      []string{"etcd", "--config-file", config, "--data-dir", "/ignored"},
			env:       []string{"ETCD_NAME=ignored"},
			want: Spec{Server: "etcd", Name: "m1", DataDir: "/var/lib/etcd", WALDir: "/mnt/wal/etcd", ConfigFile: config,
				PeerURLs: []string{"https://10.0.0.1:2380"}, ClientURLs: []string{"https://10.0.0.1:2379", "https://127.0.0.1:2379"},
				ClientTLS: TLS{CertFile: "/etc/etcd/server.crt", KeyFile: "/etc/etcd/server.key", TrustedCAFile: "/etc/etcd/ca.crt", ClientCertAuth: true},
				PeerTLS:   TLS{CertFile: "/srv/peer.crt"}},
			origin: map[string]string{"config-file": "flag --config-file", "name": "config file " + config + ": name"},
		},
		{
			situation: "the config file named by ETCD_CONFIG_FILE",
			argv:      []string{"etcd"},
			env:       []string{"ETCD_CONFIG_FILE=" + config},
			want: Spec{Server: "etcd", Name: "m1", DataDir: "/var/lib/etcd", WALDir: "/mnt/wal/etcd", ConfigFile: config,
				PeerURLs: []string{"https://10.0.0.1:2380"}, ClientURLs: []string{"https://10.0.0.1:2379", "https://127.0.0.1:2379"},
				ClientTLS: TLS{CertFile: "/etc/etcd/server.crt", KeyFile: "/etc/etcd/server.key", TrustedCAFile: "/etc/etcd/ca.crt", ClientCertAuth: true},
				PeerTLS:   TLS{CertFile: "/srv/peer.crt"}},
		},
		{
			situation: "the etcd linked into etcdmedic",
			argv:      []string{"/usr/local/bin/etcdmedic", "etcd", "--name=m2", "--data-dir=rel/m2"},
			want:      Spec{Server: "etcd", Name: "m2", DataDir: "/srv/rel/m2", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
		},
		{
			situation: "TiDB PD: flags over defaults, data dir default.<name>",
			argv:      []string{"/pd-server", "--name=pd-1", "--client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://pd-1:2379"},
			want:      Spec{Server: "pd-server", Name: "pd-1", DataDir: "/srv/default.pd-1", PeerURLs: []string{"http://127.0.0.1:2380"}, ClientURLs: []string{"http://pd-1:2379"}},
		},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			s, err := FromCommand(tc.argv, EnvironmentOf(tc.env, "/srv"))
			if err != nil {
				t.Fatal(err)
			}
			assertSpec(t, s, tc.want)
			for key, want := range tc.origin {
				if s.Origins[key] != want {
					t.Errorf("origin of %s: %q, want %q", key, s.Origins[key], want)
				}
			}
		})
	}
}

func TestFromCommandRefusesWhatEtcdWouldRefuse(t *testing.T) {
	for _, tc := range []struct {
		situation string
		argv      []string
		env       []string
		want      string // in the error
	}{
		{"no command line", []string{}, nil, "no command line"},
		{"a stray argument", []string{"etcd", "stray"}, nil, "unexpected argument"},
		{"a missing config file", []string{"etcd", "--config-file", "/does/not/exist.yml"}, nil, "config file"},
		{"not etcd", []string{"bash", "-c", "etcd"}, nil, "is not etcd"},
		// etcd's verifyEnv is fatal when a flag and its variable are both set (the flag used
		// to win here silently: etcd never runs so).
		{"a flag and its variable", []string{"etcd", "--data-dir", "/flag"}, []string{"ETCD_DATA_DIR=/env"}, "--data-dir is set both as a flag and as ETCD_DATA_DIR"},
		{"a single-dash flag and its variable", []string{"etcd", "-name=m1"}, []string{"ETCD_NAME=m2"}, "--name is set both as a flag and as ETCD_NAME"},
		{"a flag and its empty variable (verifyEnv sees it too)", []string{"etcd", "--initial-cluster-state=new"}, []string{"ETCD_INITIAL_CLUSTER_STATE="}, "ETCD_INITIAL_CLUSTER_STATE"},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			s, err := FromCommand(tc.argv, EnvironmentOf(tc.env, "/"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q with %q: want an error with %q, got %+v, %v", tc.argv, tc.env, tc.want, s, err)
			}
		})
	}
}

// Real unit shapes from etcd's and the distributions' packaging (testdata/units).
func TestFromUnitFileReadsPackagedUnits(t *testing.T) {
	dir := t.TempDir()
	host := Host{Hostname: "node-a", MachineID: "0123456789abcdef"}
	envFile := filepath.Join(dir, "etcd.conf")
	copyFile(t, "testdata/units/etcd-fedora.conf", envFile)
	defaults := filepath.Join(dir, "default")
	os.Mkdir(defaults, 0o700)
	copyFile(t, "testdata/units/etcd-defaults", filepath.Join(defaults, "etcd"))
	config := filepath.Join(dir, "etcd.conf.yml")
	writeFile(t, config, "name: from-yaml\ndata-dir: /data/etcd\nwal-dir: /wal/etcd\n")
	// Fedora's unit passes its EnvironmentFile's ETCD_* as flags too, which etcd 3.4+ refuses
	// (TestFromUnitFileRefusesWhatItCannotRead); the same shell line with variables etcd does
	// not read runs.
	b, err := os.ReadFile("testdata/units/etcd-fedora.conf")
	if err != nil {
		t.Fatal(err)
	}
	shellEnvFile := filepath.Join(dir, "shell.conf")
	writeFile(t, shellEnvFile, strings.ReplaceAll(string(b), "ETCD_", ""))

	hardway := readUnit(t, "etcd-hardway.service", nil)
	distroConf := filepath.Join(dir, "distro.conf")
	writeFile(t, distroConf, "ETCD_DATA_DIR=\"/var/lib/etcd/default.etcd\"\nETCD_NAME=\"node-a\"\n")
	distro := "[Service]\nEnvironmentFile=-" + distroConf + "\nExecStart=/usr/bin/etcd\n"
	for _, tc := range []struct {
		situation string
		name      string
		text      string
		want      Spec
		origin    map[string]string
	}{
		{"etcd's own unit: Environment= and %m", "etcd.service", readUnit(t, "etcd-upstream.service", nil),
			Spec{Server: "etcd", Name: "0123456789abcdef", DataDir: "/var/lib/etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			map[string]string{"data-dir": "ETCD_DATA_DIR (Environment= of etcd.service)"}},
		{"a shell line (Fedora's shape) with an EnvironmentFile, relative to WorkingDirectory", "etcd.service", readUnit(t, "etcd-fedora.service", map[string]string{"@ENVFILE@": shellEnvFile, "${ETCD_": "${"}),
			Spec{Server: "etcd", Name: "default", DataDir: "/var/lib/etcd/default.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			map[string]string{"data-dir": "flag --data-dir"}},
		{"Debian: %H, $DAEMON_ARGS from /etc/default/%p", "etcd.service", readUnit(t, "etcd-debian.service", map[string]string{"@DEFAULTS@": defaults}),
			Spec{Server: "etcd", Name: "node-a", DataDir: "/var/lib/etcd/default", WALDir: "/var/lib/etcd-wal", PeerURLs: []string{"http://10.0.0.1:2380"}, ClientURLs: []string{"http://10.0.0.1:2379"}},
			map[string]string{"advertise-client-urls": "ETCD_ADVERTISE_CLIENT_URLS (EnvironmentFile " + filepath.Join(defaults, "etcd") + ")", "wal-dir": "flag --wal-dir"}},
		{"the hard way: flags on continued lines, TLS", "etcd.service", hardway,
			Spec{Server: "etcd", Name: "controller-0", DataDir: "/var/lib/etcd", PeerURLs: []string{"https://10.240.0.10:2380"}, ClientURLs: []string{"https://10.240.0.10:2379"},
				InitialCluster: "controller-0=https://10.240.0.10:2380,controller-1=https://10.240.0.11:2380",
				ClientTLS:      TLS{CertFile: "/etc/etcd/kubernetes.pem", KeyFile: "/etc/etcd/kubernetes-key.pem", TrustedCAFile: "/etc/etcd/ca.pem", ClientCertAuth: true},
				PeerTLS:        TLS{CertFile: "/etc/etcd/kubernetes.pem", KeyFile: "/etc/etcd/kubernetes-key.pem", TrustedCAFile: "/etc/etcd/ca.pem", ClientCertAuth: true}}, nil},
		{"a drop-in's Environment= does not beat the unit's EnvironmentFile= (systemd applies the files last)", "etcd.service",
			distro + "\n# /etc/systemd/system/etcd.service.d/10-data.conf\n[Service]\nEnvironment=ETCD_DATA_DIR=/data/etcd\n",
			Spec{Server: "etcd", Name: "node-a", DataDir: "/var/lib/etcd/default.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			map[string]string{"data-dir": "ETCD_DATA_DIR (EnvironmentFile " + distroConf + ")"}},
		{"an empty Environment= in a drop-in resets the unit's", "etcd.service",
			"[Service]\nEnvironment=ETCD_DATA_DIR=/old ETCD_NAME=old\nExecStart=/usr/bin/etcd\n[Service]\nEnvironment=\nEnvironment=ETCD_NAME=m2\n",
			Spec{Server: "etcd", Name: "m2", DataDir: "/m2.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}},
			map[string]string{"name": "ETCD_NAME (Environment= of etcd.service)", "data-dir": "default (<name>.etcd)"}},
		{"an empty EnvironmentFile= in a drop-in resets the unit's files", "etcd.service",
			"[Service]\nEnvironmentFile=/etc/etcd/gone.conf\nExecStart=/usr/bin/etcd\n[Service]\nEnvironmentFile=\nEnvironmentFile=" + distroConf + "\n",
			Spec{Server: "etcd", Name: "node-a", DataDir: "/var/lib/etcd/default.etcd", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}}, nil},
		{"a drop-in that resets ExecStart to a config file", "etcd", hardway + "\n# /etc/systemd/system/etcd.service.d/10-config.conf\n[Service]\nExecStart=\nExecStart=/usr/local/bin/etcd --config-file " + config + "\n",
			Spec{Server: "etcd", Name: "from-yaml", DataDir: "/data/etcd", WALDir: "/wal/etcd", ConfigFile: config, PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}}, nil},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			s, err := FromUnitFile(tc.name, []byte(tc.text), host)
			if err != nil {
				t.Fatal(err)
			}
			assertSpec(t, s, tc.want)
			if s.Runs.Kind != Systemd || s.Runs.Unit != "etcd.service" || s.Runs.Stop != "systemctl stop etcd.service" {
				t.Errorf("runs: %+v", s.Runs)
			}
			for key, want := range tc.origin {
				if s.Origins[key] != want {
					t.Errorf("origin of %s: %q, want %q", key, s.Origins[key], want)
				}
			}
		})
	}
}

func TestFromUnitFileRefusesWhatItCannotRead(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "etcd.conf")
	copyFile(t, "testdata/units/etcd-fedora.conf", envFile)
	// Fedora's unit as it was: its EnvironmentFile's ETCD_DATA_DIR reaches etcd, and so does
	// the --data-dir the shell line makes of it. etcd 3.4+ refuses to start so (verifyEnv);
	// this test used to expect /var/lib/etcd/default.etcd from it.
	fedora := readUnit(t, "etcd-fedora.service", map[string]string{"@ENVFILE@": envFile})
	if s, err := FromUnitFile("etcd.service", []byte(fedora), Host{}); err == nil || !strings.Contains(err.Error(), "--data-dir is set both as a flag and as ETCD_DATA_DIR (EnvironmentFile "+envFile+")") {
		t.Errorf("Fedora's unit with both: want the conflict named, got %+v, %v", s, err)
	}
	for name, text := range map[string]string{
		"a container":        readUnit(t, "etcd-docker.service", nil),
		"no ExecStart":       "[Service]\nType=notify\n",
		"a missing env":      "[Service]\nEnvironmentFile=/does/not/exist\nExecStart=/usr/bin/etcd\n",
		"a shell, no etcd":   "[Service]\nExecStart=/bin/sh -c \"sleep 1\"\n",
		"a stray argument":   "[Service]\nExecStart=/usr/bin/etcd data\n",
		"an empty ExecStart": "[Service]\nExecStart=/usr/bin/etcd\nExecStart=\n",
	} {
		if s, err := FromUnitFile("etcd.service", []byte(text), Host{}); err == nil {
			t.Errorf("%s: want an error, got %+v", name, s)
		}
	}
}

func TestFromPDConfigReadsTOML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pd.toml")
	writeFile(t, path, `
name = "pd-0"
data-dir = "data/pd-0"
client-urls = "http://0.0.0.0:2379"
advertise-client-urls = "http://pd-0.pd:2379"
peer-urls = "http://0.0.0.0:2380"
advertise-peer-urls = "http://pd-0.pd:2380"
initial-cluster = "pd-0=http://pd-0.pd:2380"

[security]
cacert-path = "/var/lib/pd-tls/ca.crt"
cert-path = "/var/lib/pd-tls/tls.crt"
key-path = "/var/lib/pd-tls/tls.key"
`)
	s, err := FromPDConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	tls := TLS{CertFile: "/var/lib/pd-tls/tls.crt", KeyFile: "/var/lib/pd-tls/tls.key", TrustedCAFile: "/var/lib/pd-tls/ca.crt"}
	assertSpec(t, s, Spec{Server: "pd-server", Name: "pd-0", DataDir: filepath.Join(dir, "data/pd-0"), ConfigFile: path,
		PeerURLs: []string{"http://pd-0.pd:2380"}, ClientURLs: []string{"http://pd-0.pd:2379"}, InitialCluster: "pd-0=http://pd-0.pd:2380", ClientTLS: tls, PeerTLS: tls})
	// pd-server's flags win over its file.
	s, err = FromCommand([]string{"/pd-server", "--config=" + path, "--data-dir=/var/lib/pd"}, EnvironmentOf(nil, "/"))
	if err != nil || s.DataDir != "/var/lib/pd" || s.Name != "pd-0" {
		t.Fatalf("pd-server --config with --data-dir: %+v %v", s, err)
	}
	writeFile(t, path, "name = [unclosed")
	if _, err := FromPDConfig(path); err == nil || !strings.Contains(err.Error(), "not TOML") {
		t.Fatalf("a broken PD config: %v", err)
	}
}

func assertSpec(t *testing.T, got, want Spec) {
	t.Helper()
	got.Origins, got.Runs = nil, Runner{}
	if want.InitialClusterState == "" { // rows that do not ask (TestInitialClusterState does)
		got.InitialClusterState = ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec\n got %+v\nwant %+v", got, want)
	}
}

func readUnit(t *testing.T, name string, replace map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/units", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for from, to := range replace {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

// --from-config given what is not etcd's config file: read as one, it would name etcd's
// defaults (<dir>/default.etcd), a data dir the member does not use, and guard would call that
// empty folder safe.
func TestFromConfigFileRefusesWhatIsNotEtcdsConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		situation string
		text      string
		want      []string // in the error; none: read
	}{
		{"kubeadm's etcd static pod, taken for its config", kubeadmManifest,
			[]string{"is a Kubernetes manifest (kind: Pod)", "its etcd runs on /var/lib/etcd (manifest's flag --data-dir)", "--kubeadm-manifest NAME="}},
		{"another Kubernetes object", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: etcd\n", []string{"Kubernetes manifest (kind: StatefulSet)"}},
		{"YAML setting none of etcd's keys", "replicas: 3\nimage: etcd\n", []string{"sets none of etcd's config file keys", filepath.Join(dir, "default.etcd")}},
		{"an empty file", "", []string{"sets none of etcd's config file keys"}},
		{"a config setting only a key the spec does not hold: etcd's defaults are right", "log-level: debug\n", nil},
		{"a config setting the data dir", "data-dir: /var/lib/etcd\n", nil},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			path := filepath.Join(dir, "etcd.yaml")
			writeFile(t, path, tc.text)
			s, err := FromConfigFile(path)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want it read, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error, got data dir %s", s.DataDir)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

const kubeadmManifest = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.11:2379
    - --data-dir=/var/lib/etcd
    - --name=master2
    image: registry.k8s.io/etcd:3.5.16-0
    name: etcd
`

// Static pods written by hand, not by kubeadm: each row is a manifest's etcd container; the
// settings are what etcd runs with, and the spec is the member it is.
func TestManifestFlagsFollowEtcdsRules(t *testing.T) {
	pod := func(items string) string {
		return "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.5.16-0\n" + items
	}
	for _, tc := range []struct {
		situation string
		manifest  string
		want      map[string]string // a subset of the settings
		name      string            // the spec's
		dataDir   string
		err       string // in the error, when etcd would refuse it
	}{
		{"kubeadm's own: --flag=value", kubeadmManifest, map[string]string{"data-dir": "/var/lib/etcd", "name": "master2"}, "master2", "/var/lib/etcd", ""},
		{"a flag and its value as two items", pod("    command:\n    - etcd\n    - --name\n    - m1\n    - --data-dir\n    - /data/etcd\n"),
			map[string]string{"name": "m1", "data-dir": "/data/etcd"}, "m1", "/data/etcd", ""},
		{"single-dash flags", pod("    command:\n    - etcd\n    - -name=m2\n    - -data-dir\n    - /data/m2\n    - -client-cert-auth\n"),
			map[string]string{"name": "m2", "data-dir": "/data/m2", "client-cert-auth": "true"}, "m2", "/data/m2", ""},
		{"settings in env:", pod("    command: [etcd]\n    env:\n    - name: ETCD_NAME\n      value: m3\n    - name: ETCD_DATA_DIR\n      value: /data/m3\n    - name: ETCD_WAL_DIR\n      value: \"\"\n"),
			map[string]string{"name": "m3", "data-dir": "/data/m3"}, "m3", "/data/m3", ""},
		{"args only: the image runs etcd", pod("    args:\n    - --name=m4\n    - --data-dir=/data/m4\n"), map[string]string{"name": "m4"}, "m4", "/data/m4", ""},
		{"a flag and its env: both set", pod("    command: [etcd, --data-dir=/a]\n    env:\n    - name: ETCD_DATA_DIR\n      value: /b\n"), nil, "", "", "--data-dir is set both as a flag and as ETCD_DATA_DIR"},
		{"a value after a boolean flag is a stray argument", pod("    command: [etcd, --client-cert-auth, \"true\", --data-dir=/a]\n"), nil, "", "", "unexpected argument \"true\""},
		{"an ETCD_* from a Secret", pod("    command: [etcd]\n    env:\n    - name: ETCD_DATA_DIR\n      valueFrom:\n        secretKeyRef: {name: s, key: k}\n"), nil, "", "", "valueFrom"},
		{"no etcd container", "kind: Pod\nspec:\n  containers:\n  - name: app\n    command: [sleep]\n", nil, "", "", "no etcd container"},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			flags, err := ManifestFlags([]byte(tc.manifest))
			path := filepath.Join(t.TempDir(), "etcd.yaml")
			writeFile(t, path, tc.manifest)
			s, serr := FromStaticPod(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || serr == nil || !strings.Contains(serr.Error(), tc.err) {
					t.Errorf("want %q from both, got %v and %v", tc.err, err, serr)
				}
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("%v / %v", err, serr)
			}
			for key, want := range tc.want {
				if flags[key] != want {
					t.Errorf("%s: %q, want %q (all: %v)", key, flags[key], want, flags)
				}
			}
			if s.Name != tc.name || s.DataDir != tc.dataDir || s.Runs.Kind != StaticPod {
				t.Errorf("spec: name %q data dir %q runs %+v", s.Name, s.DataDir, s.Runs)
			}
		})
	}
}

// Whether a member bootstraps a cluster on an empty data dir (guard judges an empty data dir
// with no cluster answering by it): etcd's --initial-cluster-state, "new" when not set.
func TestInitialClusterState(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "etcd.conf.yml")
	writeFile(t, config, "name: m1\ndata-dir: /var/lib/etcd\ninitial-cluster-state: existing\n")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"not set: etcd's default", []string{"etcd", "--name=m1"}, nil, "new"},
		{"the flag", []string{"etcd", "--name=m1", "--initial-cluster-state=existing"}, nil, "existing"},
		{"the variable", []string{"etcd", "--name=m1"}, []string{"ETCD_INITIAL_CLUSTER_STATE=existing"}, "existing"},
		{"the config file", []string{"etcd", "--config-file=" + config}, nil, "existing"},
		{"PD bootstrapping from its --initial-cluster", []string{"pd-server", "--name=pd-0", "--initial-cluster=pd-0=http://10.0.0.10:2380"}, nil, "new"},
		{"PD joining a running cluster (--join)", []string{"pd-server", "--name=pd-3", "--join=http://10.0.0.10:2379"}, nil, "existing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromCommand(tc.args, EnvironmentOf(tc.env, "/"))
			if err != nil || s.InitialClusterState != tc.want {
				t.Fatalf("initial cluster state %q (%v): want %q", s.InitialClusterState, err, tc.want)
			}
		})
	}
}
