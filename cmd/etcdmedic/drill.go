package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/drill"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

// writeDrillReport writes the drills' HTML report to path (mode 0600: it names data dirs).
func writeDrillReport(path string, results []*drill.Result) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if err := drill.WriteReport(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type drillResult struct {
	Results []*drill.Result `json:"results"`
}

func newDrillCommand(opts *globalOptions) *cobra.Command {
	var dir string
	var keep, naive, kubernetes bool
	var report string
	var names []string
	for _, d := range drill.All() {
		names = append(names, d.Name)
	}
	cmd := &cobra.Command{
		Use:   "drill [" + strings.Join(names, "|") + "]",
		Short: "Reproduce an incident on a local sandbox, repair it with etcdmedic, and count what was lost",
		Long: `Each drill starts a local cluster on 127.0.0.1, puts it under load (a ledger of every
acknowledged write, and a workload of 8 clients doing puts, deletes, compare-and-swaps,
linearizable reads and lease puts, with 2 watchers, every operation recorded), breaks it the
way the incident did, repairs it with etcdmedic's own commands, and prints the timeline as it
goes: the time to repair, the write outage, the operations acknowledged, and the acknowledged
writes lost (which must be 0), and the checker's verdict on the whole history (linearizable,
nothing acknowledged lost or undone, revisions and watches in order). With no argument, every
drill runs.

The stale-volume, quorum-loss and power-cut drills run the etcd linked into etcdmedic; the
upgrade drill runs real etcd v3.5.19, v3.5.24 and v3.6.16, built from the Go module proxy the
first time (about 75 s each, cached in ~/.cache/etcdmedic/etcd). With --naive, the upgrade
drill upgrades in place by hand instead, and shows the member failing to start on v3.6 (the
drill passes when that failure is reproduced and nothing is lost). The power-cut drill needs
root and /dev/fuse; elsewhere it is skipped. The total-loss drill runs backup run into a
file:// store beside the cluster, wipes every member's disk under write load, restores from
the store, and reports the recovery point: nothing acknowledged up to it may be lost.

--report FILE.html writes one self-contained page: throughput and latency over time with the
incident's phases and the write outage marked, then each drill's timeline.

Drills: ` + strings.Join(names, ", ") + `. Exit 0 when every drill passed, 2 otherwise, 3 when stopped (SIGINT, SIGTERM) before they finished.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			drills := drill.All()
			if len(args) == 1 {
				d, ok := drill.Find(args[0])
				if !ok {
					return failf("drills: "+strings.Join(names, ", "), "no drill %q", args[0])
				}
				drills = []drill.Drill{d}
			}
			if report != "" {
				// Checked before the drills run, not after minutes of them.
				if st, err := os.Stat(filepath.Dir(report)); err != nil || !st.IsDir() {
					return failf("give a file in an existing folder", "--report %s: its folder does not exist", report)
				}
			}
			if naive && len(args) == 1 && args[0] != "upgrade" {
				return failf("etcdmedic drill upgrade --naive", "--naive is for the upgrade drill, not %s", args[0])
			}
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			crashFS, err := crashFSCommandLine()
			if err != nil {
				return err
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "etcdmedic-drill-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
			}
			// The timeline as it happens: for a person on stdout, before the summary; with -w json,
			// JSON lines on stderr, stdout being the result's.
			progress := cmd.OutOrStdout()
			if opts.writeOut == "json" {
				progress = newProgress(opts.writeOut, cmd.ErrOrStderr()).lines("drill")
			}
			env := drill.Env{Dir: dir, Command: command, CrashFS: crashFS, Etcdmedic: command[0], Naive: naive, Kubernetes: kubernetes, Out: progress}
			results, failed := drill.RunAll(cmd.Context(), drills, env)
			res := drillResult{Results: results}
			p, _ := printerFor(opts.writeOut)
			if err := p.Drill(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(progress, "kept %s\n", dir)
			}
			if report != "" {
				if err := writeDrillReport(report, res.Results); err != nil {
					return err
				}
				fmt.Fprintf(progress, "report: %s\n", report)
			}
			if cmd.Context().Err() != nil {
				return errors.New("the drills were stopped before they finished")
			}
			if failed > 0 {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "folder for the drills' sandboxes, plans and backups (default: a temporary one, removed afterwards)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the folder afterwards")
	cmd.Flags().BoolVar(&naive, "naive", false, "upgrade drill: upgrade in place by hand (swap a member's binary for v3.6) instead of with etcdmedic, and show it failing")
	cmd.Flags().BoolVar(&kubernetes, "kubernetes", false, "run a kube-apiserver ("+etcdbin.KubeAPIServerVersion+", built once from the Go module proxy, about 5 minutes) beside each member and a client-go workload through them (ConfigMaps and Secrets, informers), and check after the repair that nothing the apiservers acknowledged is lost, resourceVersions never go back, every informer converges and every apiserver is ready again")
	cmd.Flags().StringVar(&report, "report", "", "write one self-contained HTML page: throughput and latency over time, the incident's phases marked")
	return cmd
}
