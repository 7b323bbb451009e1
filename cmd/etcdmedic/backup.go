package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/store"
)

// backupResult is what backup now, ls and verify print.
type backupResult struct {
	Store   string          `json:"store"`
	Taken   *archive.Full   `json:"taken,omitempty"`
	Backups []archive.Entry `json:"backups,omitempty"`
	// Verified are the verifications this run made.
	Verified []archive.Verification `json:"verified,omitempty"`
}

// storeFlags say where backups are and how they are sealed.
type storeFlags struct {
	url          string
	recipients   []string
	identityFile string
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
	st, err := store.Open(cmd.Context(), s.url, store.Options{Recipients: s.recipients, IdentityFile: s.identityFile})
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
	cmd.AddCommand(newBackupNowCommand(opts), newBackupLsCommand(opts), newBackupVerifyCommand(opts))
	return cmd
}

func newBackupNowCommand(opts *globalOptions) *cobra.Command {
	var conn connFlags
	var sf storeFlags
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
			p, _ := printerFor(opts.writeOut)
			return p.Backup(cmd.OutOrStdout(), backupResult{Store: sf.url, Backups: entries})
		},
	}
	sf.register(cmd)
	return cmd
}

func newBackupVerifyCommand(opts *globalOptions) *cobra.Command {
	var sf storeFlags
	var etcdCommand, etcdutl string
	var all bool
	cmd := &cobra.Command{
		Use:   "verify [ID|latest]",
		Short: "Restore a backup into a scratch one-member etcd and compare its hash with the cluster's at the backup's revision",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
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
			etcd := strings.Fields(etcdCommand)
			if len(etcd) == 0 {
				if etcd, err = linkedEtcdCommandLine(); err != nil {
					return err
				}
			}
			res := backupResult{Store: sf.url}
			failed := 0
			for _, e := range todo {
				v, err := archive.Verify(cmd.Context(), st, &e.Full, archive.VerifyOptions{Etcd: etcd, Etcdutl: etcdutl, Scratch: scratchDir()})
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
	cmd.Flags().StringVar(&etcdutl, "etcdutl", "etcdutl", "etcdutl of the cluster's version, to restore the snapshot")
	cmd.Flags().BoolVar(&all, "all", false, "verify every backup in the store")
	return cmd
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
	e, err := archive.Find(entries, id)
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
	var backupID, etcdutl string
	var dataDirs, peerURLs []string
	var ro archive.RestoreOptions
	cmd := &cobra.Command{
		Use:   "restore --store URL --data-dir NAME=PATH...",
		Short: "Restore a backup from the store into a new data dir for every member (every disk lost)",
		Long: `Downloads a backup (latest, or --backup ID), checks it against its manifest and etcd's
sha256 trailer, and restores it with etcdutl into a data dir for every member named, as one new
cluster: the peer URLs come from the backup's own membership unless given with --peer-url.
Data dirs must be absent or empty: a restore never writes over data. For Kubernetes add
--bump-revision 1000000000 --mark-compacted. Then start each member on its data dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			entries, err := archive.List(cmd.Context(), st)
			if err != nil {
				return failf("", "restore: %v", err)
			}
			e, err := archive.Find(entries, backupID)
			if err != nil {
				return failf("etcdmedic backup ls --store "+sf.url, "restore: %v", err)
			}
			var targets []archive.Target
			for _, name := range slices.Sorted(maps.Keys(dirs)) {
				abs, err := filepath.Abs(dirs[name])
				if err != nil {
					return err
				}
				targets = append(targets, archive.Target{Name: name, DataDir: abs, PeerURL: peers[name]})
			}
			ro.Etcdutl, ro.Scratch = etcdutl, scratchDir()
			res, err := archive.Restore(cmd.Context(), st, &e.Full, targets, ro)
			if err != nil {
				return failf("", "restore: %v", err)
			}
			p, _ := printerFor(opts.writeOut)
			return p.Restore(cmd.OutOrStdout(), restoreResult{Store: sf.url, Restored: res})
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&backupID, "backup", "latest", "which backup (etcdmedic backup ls)")
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "a member's new data dir as NAME=PATH (repeat for every member)")
	cmd.Flags().StringArrayVar(&peerURLs, "peer-url", nil, "a member's peer URL as NAME=URL (default: the backup's membership)")
	cmd.Flags().StringVar(&etcdutl, "etcdutl", "etcdutl", "etcdutl of the version the members will run")
	cmd.Flags().Uint64Var(&ro.BumpRevision, "bump-revision", 0, "add this to every revision (Kubernetes: more than the writes since the backup, e.g. 1000000000)")
	cmd.Flags().BoolVar(&ro.MarkCompacted, "mark-compacted", false, "with --bump-revision: mark the restored revisions compacted, so that watchers and informers relist")
	cmd.Flags().StringVar(&ro.Token, "initial-cluster-token", "", "the new cluster's token (default: etcdutl's)")
	return cmd
}
