package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// newSandboxDemoCommand is the first thing a new user runs: a local 3-member cluster, some
// writes, one member stopped and its data dir inspected offline, everything cleaned up.
func newSandboxDemoCommand(opts *globalOptions) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a local 3-member cluster, write to it, stop a member and inspect its data dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			dir := cmd.Flag("dir").Value.String()
			if !cmd.Flag("dir").Changed {
				tmp, err := os.MkdirTemp("", "etcdmedic-demo-")
				if err != nil {
					return err
				}
				dir = tmp
				if !keep {
					defer os.RemoveAll(tmp)
				}
			}
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			// Steps for a person on stdout, around the report; with -w json, JSON lines on
			// stderr, stdout being the report's.
			steps := out
			if opts.writeOut == "json" {
				steps = progressOf(cmd)
			}
			step := func(format string, a ...any) { fmt.Fprintf(steps, "==> "+format+"\n", a...) }
			started := time.Now()
			if cmd.Flag("dir").Changed { // a folder of its own (a temporary one) needs no lock
				l, err := sandbox.Lock(dir, "demo")
				if err != nil {
					return failf("wait for it to finish", "sandbox demo: %v", err)
				}
				defer l.Release()
			}
			step("starting a 3-member etcd cluster (the etcd linked into etcdmedic) in %s", dir)
			sb, err := sandbox.Up(cmd.Context(), sandbox.Options{Dir: dir, Members: 3, Command: command})
			if sb != nil {
				defer sb.Down(10 * time.Second)
			}
			if err != nil {
				return failf("member logs are in "+dir, "sandbox up: %v", err)
			}
			const writes = 500
			step("writing %d keys", writes)
			if err := writeDemoKeys(cmd.Context(), sb, writes); err != nil {
				return failf("member logs are in "+dir, "write to the sandbox: %v", err)
			}
			step("stopping member m3 (SIGTERM) so its data dir can be read offline")
			if err := sb.StopMember("m3", 10*time.Second); err != nil {
				return err
			}
			m3, _ := sb.Member("m3")
			step("etcdmedic inspect %s", m3.DataDir)
			report, err := datadir.Inspect(m3.DataDir, datadir.Options{})
			if err != nil {
				return inspectError(err)
			}
			res := inspectResult{Report: report, Findings: finding.ForDataDir(report)}
			if res.Findings == nil {
				res.Findings = []finding.Finding{}
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Inspect(out, res); err != nil {
				return err
			}
			step("stopping the sandbox (%s in all)", time.Since(started).Round(100*time.Millisecond))
			if keep {
				step("kept %s: etcdmedic sandbox status --dir %s", dir, dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the sandbox folder (data dirs and logs) afterwards")
	return cmd
}

func writeDemoKeys(ctx context.Context, sb *sandbox.Sandbox, n int) error {
	cli, err := sb.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	for i := 0; i < n; i++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(wctx, fmt.Sprintf("demo/key-%05d", i), fmt.Sprintf("value %d written at %s", i, time.Now().Format(time.RFC3339Nano)))
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
