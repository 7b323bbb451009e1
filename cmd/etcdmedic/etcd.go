package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdmedic/etcdmedic/runtime"
)

// linkedEtcdCommand runs the etcd server linked into etcdmedic, so that a sandbox needs no
// download: `etcdmedic etcd --name m1 ...` takes exactly etcd's own flags.
const linkedEtcdCommand = "etcd"

func runLinkedEtcd(args []string) {
	etcdmain.Main(append([]string{"etcd"}, args...))
}

// passEnvUsage is --pass-env's help, the same on every command that starts members.
const passEnvUsage = "an ETCD_* variable of this shell to give the members it starts, by name (repeatable); they get no other ETCD_* and no ETCDCTL_*"

// passedEnv reads the --pass-env variables as NAME=value.
func passedEnv(names []string) ([]string, error) {
	env, err := runtime.Passed(names)
	if err != nil {
		return nil, failf("export it first, e.g. export ETCD_QUOTA_BACKEND_BYTES=8589934592, then --pass-env ETCD_QUOTA_BACKEND_BYTES", "%v", err)
	}
	return env, nil
}

// linkedEtcdutlCommand runs the etcdutl linked into etcdmedic (of the same version as the
// linked etcd): `etcdmedic etcdutl snapshot restore ...` takes etcdutl's own arguments.
const linkedEtcdutlCommand = "etcdutl"

func runLinkedEtcdutl(args []string) int {
	root := &cobra.Command{Use: "etcdutl", SilenceUsage: true}
	root.PersistentFlags().DurationVar(&etcdutl.FlockTimeout, "timeout", 10*time.Second, "time to wait to obtain a file lock on db file")
	root.PersistentFlags().StringVarP(&etcdutl.OutputFormat, "write-out", "w", "simple", "set the output format (fields, json, protobuf, simple, table)")
	root.AddCommand(etcdutl.NewSnapshotCommand(), etcdutl.NewDefragCommand(), etcdutl.NewHashKVCommand(), etcdutl.NewVersionCommand())
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		return 1
	}
	return 0
}

const etcdutlUsage = "the etcdutl that restores, of the version the members run, as a path or a command line (default: the etcdutl linked into etcdmedic, of the linked etcd's version)"

// etcdutlCommandLine is --etcdutl as a command line: the linked etcdutl when not given.
func etcdutlCommandLine(flag string) ([]string, error) {
	if f := strings.Fields(flag); len(f) > 0 {
		return f, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find etcdmedic's own binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, err
	}
	return []string{exe, linkedEtcdutlCommand}, nil
}
