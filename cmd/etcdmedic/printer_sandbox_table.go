package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func (tablePrinter) Sandbox(w io.Writer, r sandboxResult) error {
	switch {
	case r.Purged:
		_, err := fmt.Fprintf(w, "sandbox stopped and %s removed\n", r.Dir)
		return err
	case r.Stopped:
		_, err := fmt.Fprintf(w, "sandbox stopped; data dirs and logs kept in %s\n", r.Dir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPID\tSTATE\tID\tLEADER\tLEARNER\tRAFT TERM\tRAFT INDEX\tREVISION\tCLIENT URL\tDATA DIR")
	for _, m := range r.Members {
		state := "stopped"
		if m.Running {
			state = "running"
			if m.Error != "" {
				state = "not answering"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%v\t%v\t%d\t%d\t%d\t%s\t%s\n", m.Name, m.PID, state, idOrDash(m.ID), m.Leader, m.IsLearner, m.RaftTerm, m.RaftIndex, m.Revision, m.ClientURL, m.DataDir)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nTo use it with etcdctl:\n  %s\n", r.Env)
	return err
}
