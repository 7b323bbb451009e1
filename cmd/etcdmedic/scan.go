package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/scan"
)

func newScanCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var sopts scan.Options
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Find every etcd or PD data dir under PATHs (say, a node's local-volume roots) and say whose it is",
		Long: `Walks each PATH (following symlinks, each directory once, so loops end), lists every etcd or PD
data dir with its identity (cluster ID, member ID, name, last raft index, last write), and with
--endpoints whether the live cluster still claims it (VALID), or it is stale (FOREIGN, REMOVED,
MISMATCHED). Unreadable entries are listed and skipped. It never writes.

Exit codes: 0 no stale data dir, 2 stale data dirs found, 3 could not run.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var view *cluster.View
			if cmd.Flags().Changed("endpoints") || cf.kubeadm != "" {
				if err := cf.resolve(cmd.Flags()); err != nil {
					return err
				}
				view = cluster.Diagnose(cmd.Context(), cf.conn, cluster.ProbeOptions{Discover: true}, false, time.Now)
			}
			res, err := scan.Scan(cmd.Context(), args, view, sopts)
			if err != nil {
				return failf("give directories to scan, such as /mnt/disks", "%v", err)
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Scan(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Stale() {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().IntVar(&sopts.MaxDepth, "max-depth", 8, "how many directory levels below each PATH to look")
	return cmd
}
