package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// A member started by a command gets the operator's etcdctl credentials never, and an ETCD_*
// of the shell only when named with --pass-env; etcd then runs with it (its quota says so).
func TestStartedMemberGetsOnlyPassedEnv(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	t.Setenv("ETCDCTL_PASSWORD", "s3cret")
	t.Setenv("ETCD_QUOTA_BACKEND_BYTES", "4294967296")
	t.Setenv("ETCD_LOG_LEVEL", "debug")
	client, peer := newURLs(t)
	dataDir := filepath.Join(t.TempDir(), "m2.etcd")
	killLocalMember(t, dataDir)
	code, out, errOut := runCLI(t, "member", "add", "--name", "m2", "--peer-urls", peer, "--client-urls", client, "--data-dir", dataDir,
		"--start", "--etcd-command", etcdmedicEtcd(t), "--pass-env", "ETCD_QUOTA_BACKEND_BYTES", "--endpoints", c.Member("m1").ClientURL)
	if code != exitOK {
		t.Fatalf("member add --start: exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(local.PIDFile(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if name, value, ok := strings.Cut(string(kv), "="); ok {
			env[name] = value
		}
	}
	_, password := env["ETCDCTL_PASSWORD"]
	_, logLevel := env["ETCD_LOG_LEVEL"]
	if password || logLevel || env["ETCD_QUOTA_BACKEND_BYTES"] != "4294967296" {
		t.Fatalf("the member's environment: %v", env)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := c.Client(t).Status(ctx, client)
	if err != nil || st.DbSizeQuota != 4294967296 {
		t.Fatalf("the member's quota: %v, %v", st, err)
	}
}

// --pass-env takes etcd's own variables only, set, and says so before anything is probed,
// stopped or written.
func TestPassEnvRefusedBeforeAnything(t *testing.T) {
	t.Setenv("ETCDCTL_PASSWORD", "s3cret")
	os.Unsetenv("ETCD_NOT_SET_HERE")
	dir := t.TempDir()
	planDir := filepath.Join(dir, "plan")
	dataDir := filepath.Join(dir, "m1.etcd")
	// A config file would make etcd ignore every flag etcdmedic starts it with; a managed
	// flag's variable would make etcd refuse to start.
	t.Setenv("ETCD_CONFIG_FILE", filepath.Join(dir, "etcd.conf.yml"))
	t.Setenv("ETCD_DATA_DIR", filepath.Join(dir, "elsewhere"))
	for _, name := range []string{"ETCDCTL_PASSWORD", "ETCD_NOT_SET_HERE", "ETCD_CONFIG_FILE", "ETCD_DATA_DIR"} {
		for _, args := range [][]string{
			{"recover", "plan", "--data-dir", "m1=" + dataDir, "--backup-dir", filepath.Join(dir, "backups"), "--plan-dir", planDir},
			{"upgrade", "plan", "--to", "v3.6.16", "--data-dir", "m1=" + dataDir, "--backup-dir", filepath.Join(dir, "backups"), "--plan-dir", planDir, "--endpoints", "127.0.0.1:1"},
			{"guard", "--data-dir", dataDir, "--name", "m1", "--peer-urls", "http://127.0.0.1:1", "--client-urls", "http://127.0.0.1:2", "--fix", "--rejoin", "--start", "--endpoints", "127.0.0.1:1"},
			{"member", "add", "--name", "m1", "--peer-urls", "http://127.0.0.1:1", "--client-urls", "http://127.0.0.1:2", "--data-dir", dataDir, "--start", "--endpoints", "127.0.0.1:1"},
		} {
			code, out, errOut := runCLI(t, append(args, "--pass-env", name)...)
			if code != exitFailed || !strings.Contains(errOut, "--pass-env") || strings.Contains(out+errOut, "s3cret") {
				t.Errorf("%s --pass-env %s: exit %d\nstdout %q\nstderr %q", strings.Join(args[:2], " "), name, code, out, errOut)
			}
		}
	}
	for _, p := range []string{planDir, dataDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created by a refused command", p)
		}
	}
}
