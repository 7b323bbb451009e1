package main

import (
	"fmt"
	"io"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/member"
)

func (tablePrinter) MemberChange(w io.Writer, r *member.Replaced) error {
	for i, p := range r.Plan {
		fmt.Fprintf(w, "STEP %d  %s\n", i+1, p)
	}
	if b := r.Backup; b != nil {
		fmt.Fprintf(w, "BACKUP  %s (%d bytes, sha256 %s, revision %d, from %s)\n", b.Path, b.Bytes, b.SHA256, b.Revision, b.From)
	}
	if r.RemovedID != etcdmedic.NoID {
		fmt.Fprintf(w, "REMOVED %s\n", r.RemovedID)
	}
	if q := r.Quarantined; q != nil {
		fmt.Fprintf(w, "QUARANTINED %d files to %s\n", q.Files, q.Dir)
	}
	if j := r.Joined; j != nil {
		fmt.Fprintf(w, "JOINED  member %s, promoted: %v\n", j.MemberID, j.Promoted)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(w)
		printFindings(w, r.Findings)
	}
	return nil
}

func (tablePrinter) MemberPromote(w io.Writer, r *member.Promoted) error {
	_, err := fmt.Fprintf(w, "promoted %s\n", r.Member.Label())
	return err
}

func (tablePrinter) MemberRemove(w io.Writer, r *member.Removed) error {
	if r.DryRun {
		_, err := fmt.Fprintf(w, "would run: %s\n", r.Command)
		return err
	}
	fmt.Fprintf(w, "removed %s\n", r.Member.Label())
	for _, n := range r.Next {
		fmt.Fprintf(w, "NEXT    %s\n", n)
	}
	return nil
}
