package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/drill"
)

type drillResult struct {
	Results []*drill.Result `json:"results"`
}

func newDrillCommand(opts *globalOptions) *cobra.Command {
	var dir string
	var keep bool
	var names []string
	for _, d := range drill.All() {
		names = append(names, d.Name)
	}
	cmd := &cobra.Command{
		Use:   "drill [" + strings.Join(names, "|") + "]",
		Short: "Reproduce an incident on a local sandbox, repair it with etcdmedic, and count what was lost",
		Long: `Each drill starts a local 3-member cluster of the etcd linked into etcdmedic, puts it under
write load with a ledger of every acknowledged write, breaks it the way the incident did,
repairs it with etcdmedic's own commands, and prints a timeline, the time to repair, and the
number of acknowledged writes lost (which must be 0). With no argument, every drill runs.

Drills: ` + strings.Join(names, ", ") + `. Exit 0 when every drill passed, 2 otherwise.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			drills := drill.All()
			if len(args) == 1 {
				d, ok := drill.Find(args[0])
				if !ok {
					return failf("drills: "+strings.Join(names, ", "), "no drill %q", args[0])
				}
				drills = []drill.Drill{d}
			}
			command, err := linkedEtcdCommandLine()
			if err != nil {
				return err
			}
			crashFS, err := crashFSCommandLine()
			if err != nil {
				return err
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "etcdmedic-drill-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
			}
			progress := cmd.ErrOrStderr()
			if opts.writeOut != "json" {
				progress = cmd.OutOrStdout()
			}
			var res drillResult
			failed := 0
			for _, d := range drills {
				r, err := drill.Run(cmd.Context(), d, drill.Env{Dir: dir, Command: command, CrashFS: crashFS, Out: progress})
				res.Results = append(res.Results, r)
				if err != nil {
					fmt.Fprintf(progress, "  FAILED: %v\n", err)
				}
				if !r.Passed && r.Skipped == "" {
					failed++
				}
			}
			p, _ := printerFor(opts.writeOut)
			if err := p.Drill(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(progress, "kept %s\n", dir)
			}
			if failed > 0 {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "folder for the drills' sandboxes, plans and backups (default: a temporary one, removed afterwards)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the folder afterwards")
	return cmd
}
