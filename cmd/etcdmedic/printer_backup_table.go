package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

func (tablePrinter) Backup(w io.Writer, r backupResult) error {
	if f := r.Taken; f != nil {
		_, err := fmt.Fprintf(w, "BACKUP %s taken from %s (etcd %s, cluster %s): revision %d, %s (%s stored%s), sha256 %s\nin %s\n",
			f.ID, f.Endpoint, f.EtcdVersion, f.ClusterID, f.Revision, humanize.IBytes(uint64(f.Data.Bytes)), humanize.IBytes(uint64(f.Data.StoredBytes)), encryptedNote(f.Data.Encrypted), f.Data.SHA256, r.Store)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if p := r.Prune; p != nil {
		fmt.Fprintln(tw, "BACKUP\tTAKEN\tREVISION\tSTATE\tPRUNE")
		for i, e := range p.Keep {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\tkeep: %s\n", e.ID, e.Taken.Format("2006-01-02 15:04:05Z"), e.Revision, e.State(), p.Why[i])
		}
		verb := "would remove"
		if r.Pruned {
			verb = "removed"
		}
		for _, e := range p.Remove {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.Taken.Format("2006-01-02 15:04:05Z"), e.Revision, e.State(), verb)
		}
		tw.Flush()
		if !r.Pruned {
			_, err := fmt.Fprintf(w, "%d backups, %d history segments, %d point verifications and %d leftovers of killed uploads to remove: run again with --yes\n", len(p.Remove), len(p.Segments), len(p.PointChecks), len(p.UploadLeftovers))
			return err
		}
		_, err := fmt.Fprintf(w, "%d backups, %d history segments, %d point verifications and %d leftovers of killed uploads removed\n", len(p.Remove), len(p.Segments), len(p.PointChecks), len(p.UploadLeftovers))
		return err
	}
	if len(r.Verified) > 0 {
		fmt.Fprintln(tw, "BACKUP\tREVISION\tRESULT\tHASHKV\tTOOK\tWHY")
		for _, v := range r.Verified {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1fs\t%s\n", v.ID, v.Revision, v.Result, v.HashKV, v.Seconds, orDash(v.Why))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "BACKUP\tTAKEN\tREVISION\tSIZE\tSTORED\tETCD\tFROM\tSTATE")
	for _, e := range r.Backups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s%s\t%s\t%s\t%s\n", e.ID, e.Taken.Format("2006-01-02 15:04:05Z"), e.Revision, humanize.IBytes(uint64(e.Data.Bytes)), humanize.IBytes(uint64(e.Data.StoredBytes)), encryptedNote(e.Data.Encrypted), e.EtcdVersion, e.Endpoint, e.State())
	}
	if len(r.Backups) == 0 {
		fmt.Fprintf(tw, "(no backup in %s)\n", r.Store)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := r.History; h != nil {
		if _, err := fmt.Fprintf(w, "\nA restore now reaches revision %d: backup %s and %d segments of history after it, the last change captured %s (%s ago)\n",
			h.Revision, h.Backup, h.Segments, h.At.Format("2006-01-02 15:04:05Z"), time.Since(h.At).Round(time.Second)); err != nil {
			return err
		}
	}
	if v := r.PointCheck; v != nil {
		_, err := fmt.Fprintf(w, "The newest point verified: revision %d (backup %s and %d revisions of history replayed) %s at %s%s\n",
			v.Revision, v.From, v.Replayed, v.Result, v.At.Format("2006-01-02 15:04:05Z"), whyNote(v.Why))
		return err
	}
	return nil
}

func whyNote(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

func encryptedNote(encrypted bool) string {
	if encrypted {
		return ", age-encrypted"
	}
	return ""
}

func (tablePrinter) Restore(w io.Writer, r restoreResult) error {
	res := r.Restored
	fmt.Fprintf(w, "RESTORED backup %s from %s: revision %d, one new cluster %s\n", res.Backup, r.Store, res.Revision, res.InitialCluster)
	for _, d := range res.DataDirs {
		fmt.Fprintf(w, "  %s\n", d)
	}
	_, err := fmt.Fprintf(w, "Start each member on its data dir (with its usual flags: the data dir now holds the new cluster's membership).\n")
	return err
}
