package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/scan"
)

func newScanCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var sopts scan.Options
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Find every etcd or PD data dir under PATHs (say, a node's local-volume roots) and say whose it is",
		Long: `Walks each PATH (following symlinks inside the PATHs, each directory once, so loops end), lists
every etcd or PD data dir with its identity (cluster ID, member ID, name, last raft index, last
write), and with --endpoints whether the live cluster still claims it (VALID), or it is stale
(FOREIGN, REMOVED, MISMATCHED). It never writes.

It stays inside the PATHs: a symlink leading outside them is listed, not followed (unless
--follow-links-outside), and /proc, /sys, /dev (and the kernel's other pseudo filesystems) are
never entered. Unreadable entries are listed and skipped.

Exit codes: 0 no stale data dir, 2 stale data dirs found, 3 could not run, or could not run
fully: something was skipped (unreadable, a dangling link, a link leading outside), listed; or,
with --endpoints, a data dir could not be judged (UNKNOWN: the cluster was not reached or has no
quorum; UNREADABLE; INCOMPLETE), listed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var view *cluster.View
			if cmd.Flags().Changed("endpoints") || cf.kubeadm != "" {
				if err := cf.resolve(cmd.Flags()); err != nil {
					return err
				}
				view = cluster.Observe(cmd.Context(), cf.conn)
			}
			res, err := scan.Scan(cmd.Context(), args, view, sopts)
			if err != nil {
				return failf("give directories to scan, such as /mnt/disks", "%v", err)
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Scan(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Stale() { // found for certain: it wins over what may be unseen
				return verdict{code: exitCritical}
			}
			partial, unjudged := res.Partial(), res.Unjudged()
			switch {
			case len(partial) > 0 && len(unjudged) > 0:
				return failf(partialHint(res), "the scan is partial: %d path(s) not looked into (listed above), a data dir may be there; and %d data dir(s) could not be judged: %s", len(partial), len(unjudged), res.UnjudgedWhy())
			case len(partial) > 0:
				return failf(partialHint(res), "the scan is partial: %d path(s) not looked into (listed above), a data dir may be there", len(partial))
			case len(unjudged) > 0:
				return failf(unjudgedHint(res), "could not judge %d data dir(s) against the live cluster (listed above): %s", len(unjudged), res.UnjudgedWhy())
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().IntVar(&sopts.MaxDepth, "max-depth", 8, "how many directory levels below each PATH to look")
	cmd.Flags().BoolVar(&sopts.FollowLinksOutside, "follow-links-outside", false, "also follow symlinks that lead outside the PATHs (never into /proc, /sys or /dev)")
	return cmd
}

// unjudgedHint says what to do about the data dirs that could not be judged.
func unjudgedHint(res *scan.Result) string {
	for _, f := range res.Found {
		if f.Verdict != nil && f.Verdict.Class == guard.Unknown {
			return "check --endpoints and the TLS flags (etcdmedic doctor probes them), or recover quorum first; keep these data dirs until they are judged"
		}
	}
	return "etcdmedic inspect each data dir listed; keep them until they are judged"
}

// partialHint says how to look into what a partial scan left out.
func partialHint(res *scan.Result) string {
	var hints []string
	if len(res.Partial()) > len(res.Outside) {
		hints = append(hints, "run as root (or the data dirs' owner) to read what was skipped")
	}
	if len(res.Outside) > 0 {
		hints = append(hints, "give the links' targets as PATHs too, or --follow-links-outside")
	}
	return strings.Join(hints, "; ")
}
