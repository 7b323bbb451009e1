package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/finding"
)

// doctorResult is the JSON of `etcdmedic doctor`: the whole view plus findings.
type doctorResult struct {
	*cluster.View
	Findings []finding.Finding `json:"findings"`
}

type doctorOptions struct {
	connFlags
	checkHash   bool
	noDiscover  bool
	watch       time.Duration
	watchRounds int
	rules       finding.ClusterRules
}

func newDoctorCommand(opts *globalOptions) *cobra.Command {
	o := &doctorOptions{rules: finding.DefaultClusterRules()}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Diagnose a live etcd (or PD) cluster: every member probed in parallel, findings with remedies",
		Long: `Probes every endpoint given and every member any member list names, in parallel, each within
--command-timeout: status, member list, health (a linearizable read), alarms, and with
--check-hash the hash of the data at a common revision. Prints one member table and the
findings, each with evidence and the next command to run.

Connection flags follow etcdctl, and ETCDCTL_* variables fill in flags not given.
--discover-kubeadm reads endpoints and certificates from kubeadm's etcd static pod manifest.

Exit codes: 0 healthy, 1 warnings, 2 critical (quorum lost or at risk, corruption), 3 could not
run (bad flags, no endpoint reachable).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			o.rules.Endpoints = o.endpointList()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (run): ends --watch
			if o.watch > 0 {
				return o.runWatch(ctx, cmd, opts)
			}
			res := o.diagnose(ctx)
			if ctx.Err() != nil {
				return fmt.Errorf("doctor: %w", context.Cause(ctx)) // probes cut short say nothing
			}
			verdict := doctorVerdict(res)
			if isFailure(verdict) && opts.writeOut != "json" {
				return verdict // nothing reached: nothing to tabulate
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Doctor(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			return verdict
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.BoolVar(&o.checkHash, "check-hash", false, "also compare every voter's hashkv at a common revision")
	f.BoolVar(&o.noDiscover, "no-discover", false, "probe only the given endpoints, not the client URLs member lists name")
	f.DurationVar(&o.watch, "watch", 0, "re-run every INTERVAL and print only what changed, until interrupted")
	f.IntVar(&o.watchRounds, "watch-rounds", 0, "with --watch: stop after this many rounds (0: until interrupted)")
	f.Uint64Var(&o.rules.LagEntries, "lag-entries", o.rules.LagEntries, "a member whose applied index trails the leader's by more entries is lagging")
	f.IntVar(&o.rules.MaxLearners, "max-learners", o.rules.MaxLearners, "the cluster's --max-learners")
	f.Int64Var(&o.rules.QuotaBytes, "quota-backend-bytes", o.rules.QuotaBytes, "quota assumed for members that do not report theirs (etcd before v3.6)")
	f.Int64Var(&o.rules.DefragMinBytes, "defrag-min-bytes", o.rules.DefragMinBytes, "report a defragmentation as due when at least this much of a db is free")
	return cmd
}

func (o *doctorOptions) diagnose(ctx context.Context) doctorResult {
	v := cluster.Diagnose(ctx, o.conn, cluster.ProbeOptions{Discover: !o.noDiscover, CheckHash: o.checkHash})
	fs := finding.ForCluster(v, o.rules)
	if fs == nil {
		fs = []finding.Finding{}
	}
	return doctorResult{View: v, Findings: fs}
}

// doctorVerdict maps a result to the exit code; no member reached at all means doctor could
// not run.
func doctorVerdict(res doctorResult) error {
	reached := false
	var errs []string
	for _, p := range res.Probes {
		if p.Reached {
			reached = true
		} else if p.Error != "" {
			errs = append(errs, p.Endpoint+": "+p.Error)
		}
	}
	if !reached {
		return failf("check --endpoints, the certificates (--cacert/--cert/--key) and that etcd runs", "no endpoint reachable (%s)", strings.Join(errs, "; "))
	}
	return verdictFor(res.Findings)
}

// runWatch re-runs the diagnosis every interval and prints only what changed.
func (o *doctorOptions) runWatch(ctx context.Context, cmd *cobra.Command, opts *globalOptions) error {
	out := cmd.OutOrStdout()
	p, _ := printerFor(opts.writeOut)
	var prev *doctorResult
	var last error
	for round := 1; ; round++ {
		res := o.diagnose(ctx)
		if prev != nil && ctx.Err() != nil {
			return last // interrupted mid-round: its probes failed on the signal, not the cluster
		}
		if prev == nil {
			if err := p.Doctor(out, res); err != nil {
				return err
			}
		} else {
			for _, line := range watchChanges(*prev, res) {
				fmt.Fprintf(out, "%s %s\n", res.TakenAt.Format(time.RFC3339), line)
			}
		}
		prev = &res
		last = doctorVerdict(res)
		if o.watchRounds > 0 && round >= o.watchRounds {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(o.watch):
		}
	}
}

// watchChanges lists what differs between two rounds: findings that appeared or cleared, and
// members that went up or down or changed role.
func watchChanges(prev, cur doctorResult) []string {
	key := func(f finding.Finding) string { return f.ID + " " + f.Subject }
	before, after := map[string]finding.Finding{}, map[string]finding.Finding{}
	for _, f := range prev.Findings {
		before[key(f)] = f
	}
	for _, f := range cur.Findings {
		after[key(f)] = f
	}
	var lines []string
	for _, f := range cur.Findings {
		if _, ok := before[key(f)]; !ok {
			lines = append(lines, fmt.Sprintf("+ [%s] %s: %s", strings.ToUpper(string(f.Severity)), f.ID, f.Summary))
		}
	}
	for _, f := range prev.Findings {
		if _, ok := after[key(f)]; !ok {
			lines = append(lines, fmt.Sprintf("- cleared %s: %s", f.ID, f.Summary))
		}
	}
	state := func(v *cluster.View) map[string]string {
		s := map[string]string{}
		for _, m := range v.Members {
			st := "down"
			if m.Up() {
				st = "up"
				if m.IsLearner {
					st += ", learner"
				}
				if m.Probe.Status.Leader == m.ID {
					st += ", leader"
				}
			}
			s[m.ShortLabel()] = st
		}
		return s
	}
	was, is := state(prev.View), state(cur.View)
	for name, st := range is {
		if was[name] == "" {
			lines = append(lines, fmt.Sprintf("member %s joined the membership (%s)", name, st))
		} else if was[name] != st {
			lines = append(lines, fmt.Sprintf("member %s: %s -> %s", name, was[name], st))
		}
	}
	for name := range was {
		if is[name] == "" {
			lines = append(lines, fmt.Sprintf("member %s left the membership", name))
		}
	}
	return lines
}

func isFailure(err error) bool {
	ce, ok := err.(*cliError)
	return ok && ce.code == exitFailed
}
