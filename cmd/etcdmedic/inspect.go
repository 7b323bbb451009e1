package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/deployment"
	"github.com/etcdmedic/etcdmedic/finding"
)

// inspectResult is the JSON of `etcdmedic inspect`: the data dir report plus findings.
type inspectResult struct {
	*datadir.Report
	Findings []finding.Finding `json:"findings"`
	// Deployment is how the member runs, when it was read with --from-process, --from-config
	// or --from-unit.
	Deployment *deployment.Spec `json:"deployment,omitempty"`
}

func newInspectCommand(opts *globalOptions) *cobra.Command {
	var deep bool
	var live liveCopyOptions
	var from deploymentFlags
	cmd := &cobra.Command{
		Use:   "inspect [DATA_DIR]",
		Short: "Inspect a stopped member's data dir offline (read-only)",
		Long: `Reads one etcd member's data dir (etcd's --data-dir, or a PD data dir such as /var/lib/pd)
without writing to it: identity, raft state, backend, membership from both of etcd's stores,
and findings with evidence and remedies.

A running member locks its files. To look at one anyway, give its client URL with
--live-endpoint: etcdmedic then reads its WAL and .snap files as they are (etcd only appends
to them) and takes a consistent copy of its db through the member's snapshot API.

A member whose WAL lives apart (etcd's --wal-dir) is read with --wal-dir. Instead of the data
dir, the member can be named by how it runs: --from-process PID (its flags, ETCD_* variables
and working directory), --from-config FILE (etcd's YAML config file, or a PD .toml), or
--from-unit NAME (its systemd unit and EnvironmentFiles).

Exit codes: 0 nothing found, 1 warnings, 2 critical findings, 3 could not inspect.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _ := printerFor(opts.writeOut)
			dataDir, walDir, spec, err := from.dataDirFrom(firstArg(args))
			if err != nil {
				return failf("", "%v", err)
			}
			var report *datadir.Report
			if live.endpoint != "" {
				report, err = cluster.InspectRunning(cmd.Context(), live.conn(), live.endpoint, dataDir, datadir.Options{Deep: deep, WALDir: walDir})
			} else {
				report, err = datadir.Inspect(dataDir, datadir.Options{Deep: deep, WALDir: walDir})
			}
			if err != nil {
				return inspectError(err)
			}
			res := inspectResult{Report: report, Findings: finding.ForDataDir(report), Deployment: spec}
			if res.Findings == nil {
				res.Findings = []finding.Finding{}
			}
			if err := p.Inspect(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			switch report.Kind {
			case datadir.KindEmpty:
				return failf("nothing to inspect; a new member may use this directory", "%s is empty: no etcd data", dataDir)
			case datadir.KindNotEtcd:
				return failf("give the directory passed to etcd as --data-dir (it holds member/wal and member/snap)", "%s is not an etcd data dir: %s", dataDir, report.KindReason)
			}
			return verdictFor(res.Findings)
		},
	}
	from.register(cmd.Flags())
	cmd.Flags().BoolVar(&deep, "deep", false, "also read the whole db: size in use, key count, and a check of every page")
	cmd.Flags().StringVar(&live.endpoint, "live-endpoint", "", "inspect a RUNNING member through a copy: its client URL, for a consistent db snapshot")
	cmd.Flags().StringVar(&live.cacert, "cacert", "", "with --live-endpoint: CA bundle to verify the member's certificate")
	cmd.Flags().StringVar(&live.cert, "cert", "", "with --live-endpoint: client certificate")
	cmd.Flags().StringVar(&live.key, "key", "", "with --live-endpoint: client key")
	cmd.Flags().BoolVar(&live.insecureSkipVerify, "insecure-skip-tls-verify", false, "with --live-endpoint: do not verify the member's certificate")
	cmd.Flags().DurationVar(&live.timeout, "command-timeout", 60*time.Second, "with --live-endpoint: time allowed to take the db snapshot")
	return cmd
}

// liveCopyOptions say how to reach a running member to copy its db consistently.
type liveCopyOptions struct {
	endpoint           string
	cacert, cert, key  string
	insecureSkipVerify bool
	timeout            time.Duration
}

func (o liveCopyOptions) conn() cluster.Conn {
	return cluster.Conn{Endpoints: []string{o.endpoint}, CACert: o.cacert, Cert: o.cert, Key: o.key, InsecureSkipVerify: o.insecureSkipVerify, DialTimeout: 5 * time.Second, CommandTimeout: o.timeout}
}

func inspectError(err error) error {
	if errors.Is(err, datadir.ErrLocked) {
		return &cliError{code: exitFailed, err: err, hint: "stop the member first, or inspect it running through a consistent copy: add --live-endpoint <its client URL>"}
	}
	return &cliError{code: exitFailed, err: err}
}

// verdictFor turns findings into the exit code: 2 critical, 1 warnings, 0 otherwise.
func verdictFor(fs []finding.Finding) error {
	switch finding.Worst(fs) {
	case finding.Critical:
		return verdict{code: exitCritical}
	case finding.Warning:
		return verdict{code: exitFindings}
	}
	return nil
}

func idOrDash(id etcdmedic.ID) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprint(id)
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
