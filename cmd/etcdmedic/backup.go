package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/store"
)

// backupResult is what backup now, ls and verify print.
type backupResult struct {
	Store   string          `json:"store"`
	Taken   *archive.Full   `json:"taken,omitempty"`
	Backups []archive.Entry `json:"backups,omitempty"`
	// Verified are the verifications this run made.
	Verified []archive.Verification `json:"verified,omitempty"`
	// History is how far a restore reaches now (backup ls): the newest full backup and the
	// history captured after it; PointCheck the newest verification of a point in time.
	History    *archive.Reach        `json:"history,omitempty"`
	PointCheck *archive.Verification `json:"pointCheck,omitempty"`
	// Prune is prune's plan, and Pruned whether it was carried out.
	Prune  *archive.PrunePlan `json:"prune,omitempty"`
	Pruned bool               `json:"pruned,omitempty"`
}

// storeFlags say where backups are and how they are sealed.
type storeFlags struct {
	url          string
	recipients   []string
	identityFile string
	create       bool // the command writes backups: a missing file:// folder is made
}

func (s *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.url, "store", "", "where backups are: file:///var/backups/etcd, s3://bucket/prefix?endpoint=URL&region=R&use_path_style=true (credentials from AWS_* variables), gs://, azblob://")
	cmd.Flags().StringSliceVar(&s.recipients, "age-recipient", nil, "encrypt every object with age to this public key (age1...; repeat for several)")
	cmd.Flags().StringVar(&s.identityFile, "age-identity", "", "age identity file that opens encrypted backups")
}

func (s *storeFlags) open(cmd *cobra.Command) (*store.Store, error) {
	if s.url == "" {
		return nil, failf("give --store file:///var/backups/etcd (or s3://...)", "no --store")
	}
	st, err := store.Open(cmd.Context(), s.url, store.Options{Recipients: s.recipients, IdentityFile: s.identityFile, Create: s.create})
	if err != nil {
		return nil, failf("", "%v", err)
	}
	return st, nil
}

func newBackupCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Full backups of a live cluster in an object store, verified by restoring them",
	}
	cmd.AddCommand(newBackupNowCommand(opts), newBackupRunCommand(opts), newBackupLsCommand(opts), newBackupVerifyCommand(opts), newBackupPruneCommand(opts))
	return cmd
}

func newBackupNowCommand(opts *globalOptions) *cobra.Command {
	var conn connFlags
	sf := storeFlags{create: true}
	cmd := &cobra.Command{
		Use:   "now",
		Short: "Take a full backup now: a snapshot from the first endpoint, checked, stored with its manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := conn.resolve(cmd.Flags()); err != nil {
				return err
			}
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			full, err := archive.TakeFull(cmd.Context(), conn.conn, st, archive.TakeOptions{Scratch: scratchDir()})
			if err != nil {
				return failf("nothing was listed in the store: a backup appears only with its manifest", "backup now: %v", err)
			}
			p, _ := printerFor(opts.writeOut)
			return p.Backup(cmd.OutOrStdout(), backupResult{Store: sf.url, Taken: full})
		},
	}
	conn.register(cmd.Flags())
	sf.register(cmd)
	return cmd
}

func newBackupLsCommand(opts *globalOptions) *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the backups in the store (only those whose manifest is there), with their verification",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := archive.List(cmd.Context(), st)
			if err != nil {
				return failf("", "backup ls: %v", err)
			}
			reach, err := archive.ReachOf(cmd.Context(), st, entries)
			if err != nil {
				return failf("", "backup ls: %v", err)
			}
			check, err := archive.LatestPointCheck(cmd.Context(), st)
			if err != nil {
				return failf("", "backup ls: %v", err)
			}
			res := backupResult{Store: sf.url, Backups: entries, History: reach, PointCheck: check}
			p, _ := printerFor(opts.writeOut)
			return p.Backup(cmd.OutOrStdout(), res)
		},
	}
	sf.register(cmd)
	return cmd
}

func newBackupVerifyCommand(opts *globalOptions) *cobra.Command {
	var sf storeFlags
	var conn connFlags
	var etcdCommand, etcdutl string
	var all, point bool
	cmd := &cobra.Command{
		Use:   "verify [ID|latest] | verify --point --endpoints URL",
		Short: "Restore a backup into a scratch one-member etcd and compare its hash with the cluster's at the backup's revision",
		Long: `Without --point: the full backup is restored into a scratch one-member etcd, whose hash at the
backup's revision must equal the one the cluster gave when the backup was taken.

With --point: the newest point in time the store reaches (the newest full backup and the
history captured after it) is replayed into a scratch member and its hash compared with the
live cluster's at that revision (so the cluster's connection flags are needed, and the cluster
must not have compacted past that revision yet). This proves the history, not only the
snapshot, restores.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if point && (all || len(args) > 0) {
				return failf("verify --point checks the newest point the store reaches", "--point takes no backup ID and no --all")
			}
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if point {
				return verifyPoint(cmd, opts, &conn, st, sf.url, etcdCommand, etcdutl)
			}
			entries, err := archive.List(cmd.Context(), st)
			if err != nil {
				return failf("", "backup verify: %v", err)
			}
			todo := entries
			if !all {
				id := "latest"
				if len(args) == 1 {
					id = args[0]
				}
				e, err := archive.Find(entries, id)
				if err != nil {
					return failf("etcdmedic backup ls --store "+sf.url, "%v", err)
				}
				todo = []archive.Entry{e}
			}
			etcd, etcdutlLine, err := restoreTools(etcdCommand, etcdutl)
			if err != nil {
				return err
			}
			creds, err := scratchCredentials(conn.conn.User, conn.conn.Password)
			if err != nil {
				return err
			}
			res := backupResult{Store: sf.url}
			failed := 0
			for _, e := range todo {
				v, err := archive.Verify(cmd.Context(), st, &e.Full, archive.VerifyOptions{Etcd: etcd, Etcdutl: etcdutlLine, Scratch: scratchDir(), Credentials: creds})
				if err != nil {
					return failf("", "verify %s: %v", e.ID, err)
				}
				res.Verified = append(res.Verified, *v)
				if v.Result != "verified" {
					failed++
				}
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Backup(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if failed > 0 {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&etcdCommand, "etcd-command", "", "the etcd server the scratch member runs (default: the etcd linked into etcdmedic)")
	cmd.Flags().StringVar(&etcdutl, "etcdutl", "", etcdutlUsage)
	cmd.Flags().BoolVar(&all, "all", false, "verify every backup in the store")
	cmd.Flags().BoolVar(&point, "point", false, "verify the newest point in time the store reaches against the live cluster (give its connection flags)")
	conn.register(cmd.Flags())
	return cmd
}

// verifyPoint is backup verify --point.
func verifyPoint(cmd *cobra.Command, opts *globalOptions, conn *connFlags, st *store.Store, storeURL, etcdCommand, etcdutl string) error {
	if err := conn.resolve(cmd.Flags()); err != nil {
		return err
	}
	etcd, etcdutlLine, err := restoreTools(etcdCommand, etcdutl)
	if err != nil {
		return err
	}
	// Reached first: a member down or a wrong certificate is one line now, not a hash request
	// that waits out its timeout.
	if err := conn.conn.Reach(cmd.Context(), conn.conn.Endpoints[0]); err != nil {
		return failf("check --endpoints and --cacert/--cert/--key", "backup verify --point: %v", err)
	}
	cli, err := conn.conn.Client()
	if err != nil {
		return failf("", "backup verify --point: %v", err)
	}
	defer cli.Close()
	creds := archive.Credentials{User: conn.conn.User, Password: conn.conn.Password}
	v, err := archive.VerifyPoint(cmd.Context(), st, cli, conn.conn.Endpoints[0], archive.VerifyOptions{Etcd: etcd, Etcdutl: etcdutlLine, Scratch: scratchDir(), Credentials: creds})
	if err != nil {
		return failf("nothing was recorded: run it again once the cause is fixed", "backup verify --point: %v", err)
	}
	p, _ := printerFor(opts.writeOut)
	if err := p.Backup(cmd.OutOrStdout(), backupResult{Store: storeURL, Verified: []archive.Verification{*v}}); err != nil {
		return err
	}
	if v.Result != "verified" {
		return verdict{code: exitCritical}
	}
	return nil
}

// scratchDir is where snapshots wait on their way: under TMPDIR, private.
func scratchDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("etcdmedic-backup-%d-%d", os.Getpid(), time.Now().UnixNano()))
}

// fetchBackup downloads backup id from the store beside the plan dir (<plan-dir>-<id>.db),
// checked against its manifest and etcd's trailer, for recover plan --from-backup.
func fetchBackup(cmd *cobra.Command, sf *storeFlags, id, planDir string) (string, error) {
	st, err := sf.open(cmd)
	if err != nil {
		return "", err
	}
	defer st.Close()
	entries, err := archive.List(cmd.Context(), st)
	if err != nil {
		return "", failf("", "--from-backup: %v", err)
	}
	var e archive.Entry
	if id == "" || id == "latest" {
		e, err = archive.LatestUsable(entries) // never one whose verification failed
	} else {
		e, err = archive.Find(entries, id)
	}
	if err != nil {
		return "", failf("etcdmedic backup ls --store "+sf.url, "--from-backup: %v", err)
	}
	abs, err := filepath.Abs(planDir)
	if err != nil {
		return "", err
	}
	path := filepath.Clean(abs) + "-" + e.ID + ".db"
	if err := archive.Fetch(cmd.Context(), st, &e.Full, path); err != nil {
		return "", failf("nothing was changed", "--from-backup: %v", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "backup %s (revision %d, %s) downloaded and checked: %s\n", e.ID, e.Revision, e.State(), path)
	return path, nil
}

// restoreResult is what restore prints.
type restoreResult struct {
	Store    string            `json:"store"`
	Restored *archive.Restored `json:"restored"`
}

func newRestoreCommand(opts *globalOptions) *cobra.Command {
	var sf storeFlags
	var etcdutl, etcdCommand, toTime string
	var toRevision int64
	var dataDirs, peerURLs []string
	var ro archive.RestoreOptions
	var user, password string
	cmd := &cobra.Command{
		Use:   "restore --store URL --data-dir NAME=PATH...",
		Short: "Restore the cluster from the store, to the latest point or to a revision or time, into a new data dir for every member",
		Long: `Takes the newest full backup at or before the point (the latest the store holds, or
--to-revision N, or --to-time T), checks it against its manifest and etcd's sha256 trailer,
replays the history captured after it (backup run) up to the point in a scratch member, one
revision per transaction so every revision keeps its number, and restores the result with
etcdutl into a data dir for every member named, as one new cluster: the peer URLs come from the
backup's own membership unless given with --peer-url.
Data dirs must be absent or empty: a restore never writes over data. For Kubernetes add
--bump-revision 1000000000 --mark-compacted. Then start each member on its data dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if toRevision < 0 {
				return failf("etcd's revisions start at 1", "--to-revision %d: give a revision of the cluster's history", toRevision)
			}
			dirs, err := parsePairs("--data-dir", "NAME=PATH", dataDirs)
			if err != nil {
				return err
			}
			peers, err := parsePairs("--peer-url", "NAME=URL", peerURLs)
			if err != nil {
				return err
			}
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			var at time.Time
			if toTime != "" {
				if at, err = time.Parse(time.RFC3339, toTime); err != nil {
					return failf("give a time as 2026-12-02T07:30:00Z", "--to-time %q: %v", toTime, err)
				}
			}
			point, err := archive.Choose(cmd.Context(), st, toRevision, at)
			if err != nil {
				return failf("etcdmedic backup ls --store "+sf.url, "restore: %v", err)
			}
			if ro.Etcd, ro.Etcdutl, err = restoreTools(etcdCommand, etcdutl); err != nil {
				return err
			}
			if ro.Credentials, err = scratchCredentials(user, password); err != nil {
				return err
			}
			var targets []archive.Target
			for _, name := range slices.Sorted(maps.Keys(dirs)) {
				abs, err := filepath.Abs(dirs[name])
				if err != nil {
					return err
				}
				targets = append(targets, archive.Target{Name: name, DataDir: abs, PeerURL: peers[name]})
			}
			ro.Scratch = scratchDir()
			res, err := archive.Restore(cmd.Context(), st, point, targets, ro)
			if err != nil {
				return failf("", "restore: %v", err)
			}
			p, _ := printerFor(opts.writeOut)
			return p.Restore(cmd.OutOrStdout(), restoreResult{Store: sf.url, Restored: res})
		},
	}
	sf.register(cmd)
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "restore the cluster as it was at this revision (default: the latest the store holds)")
	cmd.Flags().StringVar(&toTime, "to-time", "", "restore the cluster as it was at this time (RFC 3339): the last change captured at or before it")
	cmd.Flags().StringVar(&etcdCommand, "etcd-command", "", "the etcd server that replays the history after the full backup (default: the etcd linked into etcdmedic)")
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "a member's new data dir as NAME=PATH (repeat for every member)")
	cmd.Flags().StringArrayVar(&peerURLs, "peer-url", nil, "a member's peer URL as NAME=URL (default: the backup's membership)")
	cmd.Flags().StringVar(&etcdutl, "etcdutl", "", etcdutlUsage)
	cmd.Flags().Uint64Var(&ro.BumpRevision, "bump-revision", 0, "add this to every revision (Kubernetes: more than the writes since the backup, e.g. 1000000000)")
	cmd.Flags().BoolVar(&ro.MarkCompacted, "mark-compacted", false, "with --bump-revision: mark the restored revisions compacted, so that watchers and informers relist")
	cmd.Flags().StringVar(&ro.Token, "initial-cluster-token", "", "the new cluster's token (default: etcdutl's)")
	cmd.Flags().StringVar(&user, "user", "", "for a backup taken with auth enabled: a user of its auth store with the root role, NAME[:PASSWORD], to replay the history as")
	cmd.Flags().StringVar(&password, "password", "", "the --user's password")
	return cmd
}

// scratchCredentials reads --user and --password as etcdctl does (NAME:PASSWORD, or NAME and a
// prompt), for a scratch member restored from a backup taken with auth enabled.
func scratchCredentials(user, password string) (archive.Credentials, error) {
	c := cluster.Conn{User: user, Password: password}
	if err := c.ResolveUser(askPassword); err != nil {
		return archive.Credentials{}, failf("give --user NAME:PASSWORD, or --user NAME with --password", "%v", err)
	}
	return archive.Credentials{User: c.User, Password: c.Password}, nil
}

func newBackupRunCommand(opts *globalOptions) *cobra.Command {
	var conn connFlags
	sf := storeFlags{create: true}
	var fullEvery, segment, verifyPointEvery time.Duration
	var metricsAddr, etcdutl, etcdCommand string
	var verify bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Back up continuously: a full backup every --full-every, and every change in between, stored every --segment",
		Long: `Runs until stopped (SIGINT or SIGTERM: the history received so far is stored first). A full
backup, then a watch of every key from its revision: the changes are stored as a segment every
--segment (5 s), so that a restore reaches seconds before a loss, not a snapshot period. A
segment the store refuses (down, slow) is kept and retried with backoff, nothing dropped. With
--verify each full backup is restored into a scratch member and checked; with
--verify-point-every the newest point the store reaches is replayed into one and checked
against the live cluster on that schedule. --metrics-addr serves
Prometheus metrics: last full backup (time, size, duration), captured revision, recovery-point
lag, verifications, store errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := conn.resolve(cmd.Flags()); err != nil {
				return err
			}
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			progress := newProgress(opts.writeOut, cmd.ErrOrStderr()).lines("backup")
			o := archive.RunOptions{Conn: conn.conn, Store: st, FullEvery: fullEvery, Segment: segment, Scratch: scratchDir(),
				Say: func(format string, a ...any) { fmt.Fprintf(progress, format+"\n", a...) }}
			if verify || verifyPointEvery > 0 {
				etcd, line, err := restoreTools(etcdCommand, etcdutl)
				if err != nil {
					return err
				}
				vo := &archive.VerifyOptions{Etcd: etcd, Etcdutl: line, Scratch: o.Scratch, Credentials: archive.Credentials{User: conn.conn.User, Password: conn.conn.Password}}
				if verify {
					o.Verify = vo
				}
				if verifyPointEvery > 0 {
					o.VerifyPoint, o.VerifyPointEvery = vo, verifyPointEvery
				}
			}
			if metricsAddr != "" {
				reg := prometheus.NewRegistry()
				o.Metrics = archive.NewMetrics(reg)
				ln, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					return failf("", "--metrics-addr: %v", err)
				}
				srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
				fmt.Fprintf(progress, "metrics on http://%s/metrics\n", ln.Addr())
			}
			err = archive.Run(cmd.Context(), o)
			if errors.Is(err, context.Canceled) && !errors.Is(context.Cause(cmd.Context()), errOutputClosed) {
				return nil // stopped by a signal, as asked
			}
			// Its output gone (a closed pipe) is no stop asked for: exit 3, so that a supervisor
			// that restarts it on failure does.
			return err
		},
	}
	conn.register(cmd.Flags())
	sf.register(cmd)
	cmd.Flags().DurationVar(&fullEvery, "full-every", time.Hour, "time between full backups")
	cmd.Flags().DurationVar(&segment, "segment", 5*time.Second, "time between two stores of the changes captured")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics here (e.g. 127.0.0.1:9479)")
	cmd.Flags().BoolVar(&verify, "verify", false, "verify each full backup by restoring it into a scratch member")
	cmd.Flags().DurationVar(&verifyPointEvery, "verify-point-every", 0, "verify the newest point in time the store reaches (backup and history replayed) against the live cluster this often (0: never)")
	cmd.Flags().StringVar(&etcdutl, "etcdutl", "", "with --verify: "+etcdutlUsage)
	cmd.Flags().StringVar(&etcdCommand, "etcd-command", "", "with --verify: the etcd server of the scratch member (default: the etcd linked into etcdmedic)")
	return cmd
}

func newBackupPruneCommand(opts *globalOptions) *cobra.Command {
	var sf storeFlags
	var r archive.Retention
	var yes bool
	cmd := &cobra.Command{
		Use:   "prune --keep-last N [--keep-daily N] [--keep-weekly N] [--yes]",
		Short: "Remove the backups retention does not keep (shows the plan; --yes removes)",
		Long: `Keeps the newest --keep-last backups, the newest of each of the last --keep-daily days and
--keep-weekly ISO weeks (UTC), and always the newest verified backup and the newest one that did
not fail verification; removes the others (each one's manifest first, so it is unlisted before
its data goes), the history segments no kept backup needs, and the temporary files of uploads
killed mid-way a day ago or more (a file:// store keeps them). At least one --keep-* flag is
required. Without --yes it only shows the plan.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if r.Last < 0 || r.Daily < 0 || r.Weekly < 0 || r.Last+r.Daily+r.Weekly == 0 {
				return failf("e.g. --keep-last 7 --keep-daily 14", "backup prune: say what to keep: --keep-last, --keep-daily or --keep-weekly, each at least 1 when given")
			}
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			// History first: a segment a running backup stores after this listing is in no
			// plan, and the backup it follows, stored before it, is listed below.
			segs, err := archive.Segments(cmd.Context(), st)
			if err != nil {
				return failf("", "backup prune: %v", err)
			}
			entries, err := archive.List(cmd.Context(), st)
			if err != nil {
				return failf("", "backup prune: %v", err)
			}
			points, err := archive.PointChecks(cmd.Context(), st)
			if err != nil {
				return failf("", "backup prune: %v", err)
			}
			plan := archive.PlanPrune(entries, segs, points, r)
			if plan.UploadLeftovers, err = archive.UploadLeftovers(cmd.Context(), st, time.Now()); err != nil {
				return failf("", "backup prune: %v", err)
			}
			res := backupResult{Store: sf.url, Prune: &plan}
			if yes {
				if err := archive.Prune(cmd.Context(), st, plan); err != nil {
					return failf("run it again: what is left is listed or removed whole", "backup prune: %v", err)
				}
				res.Pruned = true
			}
			p, _ := printerFor(opts.writeOut)
			return p.Backup(cmd.OutOrStdout(), res)
		},
	}
	sf.register(cmd)
	cmd.Flags().IntVar(&r.Last, "keep-last", 0, "keep the newest N backups")
	cmd.Flags().IntVar(&r.Daily, "keep-daily", 0, "keep the newest backup of each of the last N days")
	cmd.Flags().IntVar(&r.Weekly, "keep-weekly", 0, "keep the newest backup of each of the last N weeks")
	cmd.Flags().BoolVar(&yes, "yes", false, "remove what the plan says (without it, only the plan is shown)")
	return cmd
}

// restoreTools are the etcd a scratch member runs and the etcdutl that restores, from
// --etcd-command and --etcdutl: the ones linked into etcdmedic when not given.
func restoreTools(etcdCommand, etcdutl string) (etcd, etcdutlLine []string, err error) {
	if etcd = strings.Fields(etcdCommand); len(etcd) == 0 {
		if etcd, err = linkedEtcdCommandLine(); err != nil {
			return nil, nil, err
		}
	}
	etcdutlLine, err = etcdutlCommandLine(etcdutl)
	return etcd, etcdutlLine, err
}
