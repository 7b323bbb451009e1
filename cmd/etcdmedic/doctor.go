package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

A member that could not be probed (a timeout, a TLS error, or not probed with --no-discover)
counts as neither up nor down: doctor reports it as not verified, never as down.

Exit codes: 0 healthy, 1 warnings, 2 critical (quorum lost or at risk, corruption), 3 could not
run (bad flags, no endpoint reachable, or no member list from any endpoint that answered).`,
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

// doctorVerdict maps a result to the exit code; no member reached at all, or no member list
// from any that answered, means doctor could not run.
func doctorVerdict(res doctorResult) error {
	var reached, errs []string
	learner := false
	for _, p := range res.Probes {
		switch {
		case p.Reached && p.Status.IsLearner:
			learner = true
			reached = append(reached, p.Endpoint+" is a learner: etcd gives a learner no member list")
		case p.Reached:
			reached = append(reached, p.Endpoint+" gave no member list: "+cmp.Or(p.MembersErr, "an empty one"))
		case p.Error != "":
			errs = append(errs, p.Endpoint+": "+p.Error)
		}
	}
	switch {
	case len(reached) == 0:
		return failf("check --endpoints, the certificates (--cacert/--cert/--key) and that etcd runs", "no endpoint reachable (%s)", strings.Join(errs, "; "))
	case len(res.Members) == 0:
		hint := "give the endpoint of a voter"
		if !learner {
			hint = "check the user's permissions (--user) and the members' logs, or give another member's endpoint"
		}
		return failf(hint, "reached %s but got no member list, so there is no membership to judge (%s)", strings.Join(endpointsOf(res.Probes), ", "), strings.Join(append(reached, errs...), "; "))
	}
	return verdictFor(res.Findings)
}

// endpointsOf lists the endpoints that answered.
func endpointsOf(probes []*cluster.Probe) []string {
	var out []string
	for _, p := range probes {
		if p.Reached {
			out = append(out, p.Endpoint)
		}
	}
	return out
}

// runWatch re-runs the diagnosis every interval and prints only what changed.
func (o *doctorOptions) runWatch(ctx context.Context, cmd *cobra.Command, opts *globalOptions) error {
	out := cmd.OutOrStdout()
	p, _ := printerFor(opts.writeOut)
	events := watchPrinter{w: out, json: opts.writeOut == "json"}
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
			for _, c := range finding.Changes(prev.judged(), res.judged()) {
				if err := events.change(res.TakenAt, c); err != nil {
					return err
				}
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

func (r doctorResult) judged() finding.Judged {
	return finding.Judged{View: r.View, Findings: r.Findings}
}

// watchPrinter prints doctor --watch's changes: a line of text each, or with -w json one JSON
// object per line (after the first round's document), for a log shipper to follow.
type watchPrinter struct {
	w    io.Writer
	json bool
}

func (p watchPrinter) change(at time.Time, c finding.Change) error {
	if !p.json {
		_, err := fmt.Fprintf(p.w, "%s %s\n", at.Format(time.RFC3339), c)
		return err
	}
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		Time time.Time `json:"time"`
		finding.Change
	}{at, c})
}

func isFailure(err error) bool {
	var ce *cliError
	return errors.As(err, &ce) && ce.code == exitFailed
}
