package main

import (
	"fmt"
	"io"
	"strings"
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
	if _, err := fmt.Fprintf(w, "\nTo use it with etcdctl:\n  %s\n", r.Env); err != nil {
		return err
	}
	if len(r.APIServers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APISERVER\tPID\tSTATE\tURL\tETCD\tLOG")
	for _, s := range r.APIServers {
		state := "stopped"
		switch {
		case s.Ready:
			state = "ready"
		case s.Running:
			state = "not ready"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.PID, state, s.URL, strings.Join(s.EtcdServers, ","), s.LogFile)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nTo use it with kubectl:\n  export KUBECONFIG=%s   # one context per member: kubectl config use-context m2\n", r.Kubeconfig)
	return err
}
