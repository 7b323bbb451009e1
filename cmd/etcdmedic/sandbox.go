package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/sandbox"
)

const defaultSandboxDir = "etcdmedic-sandbox"

// sandboxResult is what sandbox commands print.
type sandboxResult struct {
	Dir     string                 `json:"dir"`
	Env     string                 `json:"env"`
	Members []sandbox.MemberStatus `json:"members"`
}

func newSandboxCommand(opts *globalOptions) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a local etcd cluster on 127.0.0.1 to try etcdmedic on",
		Long: `A sandbox is a local etcd cluster whose members are separate processes of the etcd linked
into etcdmedic, with data dirs and logs in one folder (--dir). Members can be stopped, killed
and restarted one at a time, like real nodes.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", defaultSandboxDir, "folder holding the sandbox's data dirs, logs and state")
	var members int
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a new sandbox cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			sb, err := sandbox.Up(cmd.Context(), sandbox.Options{Dir: dir, Members: members, Command: command})
			if err != nil {
				return failf("member logs are in "+dir, "sandbox up: %v", err)
			}
			return printSandbox(cmd, opts, sb)
		},
	}
	up.Flags().IntVar(&members, "members", 3, "number of members")
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each sandbox member's process and raft status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := loadSandbox(dir)
			if err != nil {
				return err
			}
			return printSandbox(cmd, opts, sb)
		},
	}
	var purge bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every sandbox member (data stays unless --purge)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := loadSandbox(dir)
			if err != nil {
				return err
			}
			if err := sb.Down(10 * time.Second); err != nil {
				// Not purged: a member that is still running keeps its data dir.
				return failf("the members whose etcd was found were stopped; see etcdmedic sandbox status --dir "+dir, "sandbox down: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			if purge {
				if err := os.RemoveAll(sb.Dir); err != nil {
					return fmt.Errorf("remove sandbox dir: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "sandbox stopped and %s removed\n", sb.Dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sandbox stopped; data dirs and logs kept in %s\n", sb.Dir)
			return nil
		},
	}
	down.Flags().BoolVar(&purge, "purge", false, "also delete the sandbox folder (its data dirs and logs)")
	memberCmd := func(use, short string, act func(sb *sandbox.Sandbox, name string) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " MEMBER",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				sb, err := loadSandbox(dir)
				if err != nil {
					return err
				}
				if err := act(sb, args[0]); err != nil {
					return failf("see etcdmedic sandbox status --dir "+dir, "%s %s: %v", use, args[0], err)
				}
				return printSandbox(cmd, opts, sb)
			},
		}
	}
	cmd.AddCommand(up, status, down,
		memberCmd("stop", "Stop one member gracefully (SIGTERM), keeping its data", func(sb *sandbox.Sandbox, name string) error {
			return sb.StopMember(name, 10*time.Second)
		}),
		memberCmd("kill", "Kill one member at once (SIGKILL), like a power loss", func(sb *sandbox.Sandbox, name string) error {
			return sb.KillMember(name)
		}),
		memberCmd("start", "Restart a stopped member on its data dir", func(sb *sandbox.Sandbox, name string) error {
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			sb.Command = command
			return sb.StartMember(name)
		}),
		newSandboxDemoCommand(opts),
	)
	return cmd
}

func loadSandbox(dir string) (*sandbox.Sandbox, error) {
	sb, err := sandbox.Load(dir)
	if err != nil {
		return nil, failf("", "%v", err)
	}
	return sb, nil
}

func printSandbox(cmd *cobra.Command, opts *globalOptions, sb *sandbox.Sandbox) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	p, _ := printerFor(opts.writeOut)
	return p.Sandbox(cmd.OutOrStdout(), sandboxResult{Dir: sb.Dir, Env: sb.Env(), Members: sb.Status(ctx)})
}

// linkedEtcdCommandLine is how a sandbox runs etcd: this very binary, `etcdmedic etcd`.
func linkedEtcdCommandLine() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find etcdmedic's own binary: %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return nil, err
	}
	return []string{exe, linkedEtcdCommand}, nil
}
