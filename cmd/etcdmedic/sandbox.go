package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

const defaultSandboxDir = "etcdmedic-sandbox"

// sandboxResult is what sandbox commands print.
type sandboxResult struct {
	Dir     string                 `json:"dir"`
	Env     string                 `json:"env,omitempty"`
	Members []sandbox.MemberStatus `json:"members"`
	// Kubeconfig and APIServers are set when the sandbox runs Kubernetes (up --kubernetes).
	Kubeconfig string                    `json:"kubeconfig,omitempty"`
	APIServers []sandbox.APIServerStatus `json:"apiservers,omitempty"`
	// Stopped and Purged say what sandbox down did.
	Stopped bool `json:"stopped,omitempty"`
	Purged  bool `json:"purged,omitempty"`
}

// sandboxOptions are the flags every sandbox subcommand shares.
type sandboxOptions struct {
	global *globalOptions
	dir    string
}

func newSandboxCommand(opts *globalOptions) *cobra.Command {
	o := &sandboxOptions{global: opts}
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a local etcd cluster on 127.0.0.1 to try etcdmedic on",
		Long: `A sandbox is a local etcd cluster whose members are separate processes of the etcd linked
into etcdmedic, with data dirs and logs in one folder (--dir). Members can be stopped, killed
and restarted one at a time, like real nodes.`,
	}
	cmd.PersistentFlags().StringVar(&o.dir, "dir", defaultSandboxDir, "folder holding the sandbox's data dirs, logs and state")
	cmd.AddCommand(
		newSandboxUpCommand(o),
		newSandboxStatusCommand(o),
		newSandboxDownCommand(o),
		newSandboxStopCommand(o),
		newSandboxKillCommand(o),
		newSandboxStartCommand(o),
		newSandboxDemoCommand(opts),
	)
	return cmd
}

func newSandboxUpCommand(o *sandboxOptions) *cobra.Command {
	var members int
	var kubernetes bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a new sandbox cluster (with --kubernetes, a kube-apiserver beside each member)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			release, err := o.lock("up")
			if err != nil {
				return err
			}
			defer release()
			sb, err := sandbox.Up(cmd.Context(), sandbox.Options{Dir: o.dir, Members: members, Command: command})
			if err != nil {
				var failed *sandbox.UpFailedError
				if errors.As(err, &failed) {
					return failf("read the member logs in "+o.dir+", then start over with: etcdmedic sandbox down --dir "+o.dir+" --purge", "sandbox up: %v", err)
				}
				return failf("member logs are in "+o.dir+"; if any member still runs: etcdmedic sandbox down --dir "+o.dir, "sandbox up: %v", err)
			}
			if kubernetes {
				if err := startSandboxKubernetes(cmd, sb); err != nil {
					return err
				}
			}
			return o.print(cmd, sb)
		},
	}
	cmd.Flags().IntVar(&members, "members", 3, "number of members")
	cmd.Flags().BoolVar(&kubernetes, "kubernetes", false, "also start a kube-apiserver ("+etcdbin.KubeAPIServerVersion+") beside each member, on that member's etcd as kubeadm does, and write a kubeconfig (the first run builds kube-apiserver from the Go module proxy: about 5 minutes, cached)")
	return cmd
}

// startSandboxKubernetes builds (once) and starts the sandbox's apiservers, saying so on stderr.
func startSandboxKubernetes(cmd *cobra.Command, sb *sandbox.Sandbox) error {
	v := etcdbin.KubeAPIServerVersion
	if !etcdbin.KubeAPIServerCached(v) {
		dir, _ := etcdbin.CacheDir()
		fmt.Fprintf(cmd.ErrOrStderr(), "building kube-apiserver %s from the Go module proxy (once, about 5 minutes; cached in %s)\n", v, dir)
	}
	bin, err := etcdbin.KubeAPIServerPath(cmd.Context(), v)
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := sb.StartKubernetes(cmd.Context(), bin, 2*time.Minute); err != nil {
		return failf("apiserver logs are in "+sb.Dir+"; the etcd members still run: etcdmedic sandbox down --dir "+sb.Dir, "sandbox up --kubernetes: %v", err)
	}
	return nil
}

func newSandboxStatusCommand(o *sandboxOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each sandbox member's process and raft status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := loadSandbox(o.dir)
			if err != nil {
				return err
			}
			return o.print(cmd, sb)
		},
	}
}

func newSandboxDownCommand(o *sandboxOptions) *cobra.Command {
	var purge bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop every sandbox member (data stays unless --purge)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			release, err := o.lock("down")
			if err != nil {
				return err
			}
			defer release()
			sb, err := loadSandbox(o.dir)
			if err != nil {
				return err
			}
			// Down returns nil only once nothing holds a member's data dir, and no other
			// sandbox command runs meanwhile (the lock): only then is anything purged.
			if err := sb.Down(10 * time.Second); err != nil {
				// Not purged: a member that is still running keeps its data dir.
				return failf("the members whose etcd was found were stopped; see etcdmedic sandbox status --dir "+o.dir, "sandbox down: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			res := sandboxResult{Dir: sb.Dir, Members: []sandbox.MemberStatus{}, Stopped: true}
			if purge {
				if err := os.RemoveAll(sb.Dir); err != nil {
					return fmt.Errorf("remove sandbox dir: %w", err)
				}
				res.Purged = true
			}
			p, _ := printerFor(o.global.writeOut)
			return p.Sandbox(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the sandbox folder (its data dirs and logs)")
	return cmd
}

func newSandboxStopCommand(o *sandboxOptions) *cobra.Command {
	return o.memberCommand("stop", "Stop one member gracefully (SIGTERM), keeping its data", func(sb *sandbox.Sandbox, name string) error {
		return sb.StopMember(name, 10*time.Second)
	})
}

func newSandboxKillCommand(o *sandboxOptions) *cobra.Command {
	return o.memberCommand("kill", "Kill one member at once (SIGKILL), like a power loss", func(sb *sandbox.Sandbox, name string) error {
		return sb.KillMember(name)
	})
}

func newSandboxStartCommand(o *sandboxOptions) *cobra.Command {
	return o.memberCommand("start", "Restart a stopped member on its data dir", func(sb *sandbox.Sandbox, name string) error {
		command, err := linkedEtcdCommandLine()
		if err != nil {
			return err
		}
		sb.Command = command
		return sb.StartMember(name)
	})
}

// memberCommand is a subcommand that acts on one member, then shows the sandbox.
func (o *sandboxOptions) memberCommand(use, short string, act func(sb *sandbox.Sandbox, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " MEMBER",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			release, err := o.lock(use)
			if err != nil {
				return err
			}
			defer release()
			sb, err := loadSandbox(o.dir)
			if err != nil {
				return err
			}
			if err := act(sb, args[0]); err != nil {
				return failf("see etcdmedic sandbox status --dir "+o.dir, "%s %s: %v", use, args[0], err)
			}
			return o.print(cmd, sb)
		},
	}
}

// lock takes the sandbox's run lock for a subcommand that changes it (up, down, stop, kill,
// start): two at once would start two etcds on one data dir and record one.
func (o *sandboxOptions) lock(purpose string) (release func(), err error) {
	l, err := sandbox.Lock(o.dir, purpose)
	if err != nil {
		var held *runlock.HeldError
		if errors.As(err, &held) {
			return nil, failf("wait for it to finish", "sandbox %s: %v", purpose, err)
		}
		return nil, failf("", "sandbox %s: %v", purpose, err)
	}
	return func() { l.Release() }, nil
}

func loadSandbox(dir string) (*sandbox.Sandbox, error) {
	sb, err := sandbox.Load(dir)
	if err != nil {
		return nil, failf("", "%v", err)
	}
	return sb, nil
}

// print shows every member's process and raft status.
func (o *sandboxOptions) print(cmd *cobra.Command, sb *sandbox.Sandbox) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	p, _ := printerFor(o.global.writeOut)
	res := sandboxResult{Dir: sb.Dir, Env: sb.Env(), Members: sb.Status(ctx), APIServers: sb.APIServerStatuses(ctx)}
	if sb.Kubernetes != nil {
		res.Kubeconfig = sb.Kubernetes.Kubeconfig
	}
	return p.Sandbox(cmd.OutOrStdout(), res)
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
