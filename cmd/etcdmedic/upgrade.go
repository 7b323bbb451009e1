package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

func newUpgradeCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade preflight: version hazards and membership drift (incident 3)",
	}
	cmd.AddCommand(newUpgradeCheckCommand(opts))
	return cmd
}

func newUpgradeCheckCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var to, from string
	var dataDirs []string
	var fetch bool
	cmd := &cobra.Command{
		Use:   "check --to VERSION [--endpoints ... [--fetch-backends]] [--data-dir NAME=PATH --from VERSION]",
		Short: "Can this cluster move to VERSION? SAFE, or BLOCKED with every reason and the cheapest safe path",
		Long: `Checks an upgrade before it starts. Versions come from the live members (--endpoints), or
--from. Membership comes from each member's data dir (--data-dir NAME=PATH, members stopped),
or, online, from a copy of each member's db taken with the snapshot API (--fetch-backends: it
streams every member's whole db once, as etcdctl snapshot save would, into a temporary file
that is removed afterwards). Online without it, v3.5 shows only the v2 store, so drift cannot be
seen and the check says so.

Exit codes: 0 SAFE, 2 BLOCKED, 3 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := upgrade.ParseVersion(to)
			if err != nil || to == "" {
				return failf("e.g. --to v3.6.16", "--to: %v", err)
			}
			var facts []upgrade.MemberFacts
			var current *upgrade.Version
			online := cmd.Flags().Changed("endpoints") || cf.kubeadm != ""
			if online {
				if err := cf.resolve(cmd.Flags()); err != nil {
					return err
				}
				v := cluster.Diagnose(cmd.Context(), cf.conn, cluster.ProbeOptions{Discover: true}, false, time.Now)
				for _, m := range v.Members {
					f := upgrade.MemberFacts{Name: m.Name, Source: "live status", Drifts: nil}
					if m.Up() {
						f.Version, f.StorageVersion = m.Probe.Status.Version, m.Probe.Status.StorageVersion
						if ver, err := upgrade.ParseVersion(f.Version); err == nil && (current == nil || ver.LessThan(*current)) {
							current = ver
						}
						if fetch && !m.IsLearner {
							f = fetchFacts(cmd.Context(), cf.conn, m, f)
						}
					} else {
						f.Error = "not reachable"
					}
					facts = append(facts, f)
				}
				if len(facts) == 0 {
					return failf("check --endpoints and the certificates", "no member answered")
				}
			}
			members, err := parseOptionalDataDirs(dataDirs)
			if err != nil {
				return err
			}
			for _, m := range members {
				r, err := datadir.Inspect(m.DataDir, datadir.Options{})
				if err != nil {
					return inspectError(err)
				}
				f := upgrade.FactsFromReport(m.Name, "data dir", r)
				facts = mergeFacts(facts, f)
			}
			if from != "" {
				if current, err = upgrade.ParseVersion(from); err != nil {
					return failf("", "--from: %v", err)
				}
			}
			if current == nil {
				return failf("give --from v3.5.x for data dirs of stopped members, or --endpoints", "the current version is unknown")
			}
			rep := upgrade.Check(current, target, facts)
			p, _ := printerFor(opts.writeOut)
			if err := p.UpgradeCheck(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if rep.Verdict != "SAFE" {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the target version, e.g. v3.6.16")
	cmd.Flags().StringVar(&from, "from", "", "the version the members run (when not asking them)")
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "a stopped member's data dir as NAME=PATH (repeatable)")
	cmd.Flags().BoolVar(&fetch, "fetch-backends", false, "copy each member's db through its snapshot API to read its v3 membership (streams the whole db)")
	return cmd
}

type namedDir struct{ Name, DataDir string }

func parseOptionalDataDirs(specs []string) ([]namedDir, error) {
	var out []namedDir
	for _, s := range specs {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return nil, failf("", "--data-dir %q: want NAME=PATH", s)
		}
		out = append(out, namedDir{name, path})
	}
	return out, nil
}

// mergeFacts puts a data dir's membership facts on the member of the same name.
func mergeFacts(facts []upgrade.MemberFacts, f upgrade.MemberFacts) []upgrade.MemberFacts {
	for i := range facts {
		if facts[i].Name == f.Name {
			f.Version = facts[i].Version
			facts[i] = f
			return facts
		}
	}
	return append(facts, f)
}

// fetchFacts streams one member's db into a temporary file and reads its v3 membership.
func fetchFacts(ctx context.Context, conn cluster.Conn, m cluster.MemberView, f upgrade.MemberFacts) upgrade.MemberFacts {
	tmp, err := os.MkdirTemp("", "etcdmedic-fetch-")
	if err != nil {
		f.Error = err.Error()
		return f
	}
	defer os.RemoveAll(tmp)
	cli, err := conn.ClientFor(m.Probe.Endpoint)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		f.Error = "snapshot: " + err.Error()
		return f
	}
	defer rc.Close()
	path := filepath.Join(tmp, "db")
	out, err := os.Create(path)
	if err == nil {
		_, err = io.Copy(out, rc)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.Error = "snapshot: " + err.Error()
		return f
	}
	r, err := datadir.Inspect(path, datadir.Options{})
	if err != nil {
		f.Error = err.Error()
		return f
	}
	got := upgrade.FactsFromReport(m.Name, "fetched db", r)
	got.Version = f.Version
	if got.StorageVersion == "" {
		got.StorageVersion = f.StorageVersion
	}
	return got
}
