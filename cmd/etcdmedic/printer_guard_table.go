package main

import (
	"fmt"
	"io"
)

func (tablePrinter) Guard(w io.Writer, r guardResult) error {
	v := r.Verdict
	fmt.Fprintf(w, "DATA DIR  %s\nCLASS     %s (safe to start: %v)\nWHY       %s\n", r.DataDir, v.Class, v.Safe, v.Reason)
	for _, e := range v.Evidence {
		fmt.Fprintf(w, "  seen:   %s = %s\n", e.What, e.Value)
	}
	if q := r.Quarantined; q != nil {
		fmt.Fprintf(w, "QUARANTINED  %d files (%d bytes) moved to %s (manifest.json has their checksums; nothing was deleted)\n", q.Files, q.Bytes, q.Dir)
		if q.Note != "" {
			fmt.Fprintf(w, "  note:   %s\n", q.Note)
		}
	}
	if j := r.Joined; j != nil {
		fmt.Fprintf(w, "JOINED    member %s, promoted: %v\n", j.MemberID, j.Promoted)
	}
	for _, n := range r.Next {
		fmt.Fprintf(w, "NEXT      %s\n", n)
	}
	return nil
}
