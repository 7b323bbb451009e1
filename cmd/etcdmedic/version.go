package main

import (
	"runtime"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/version"
)

// etcdmedicVersion is set at build time with -ldflags "-X main.etcdmedicVersion=...".
var etcdmedicVersion = "0.1.0-dev"

type versionInfo struct {
	Etcdmedic  string `json:"etcdmedic"`
	LinkedEtcd string `json:"linkedEtcd"`
	Go         string `json:"go"`
}

func newVersionCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print etcdmedic's version and the etcd version it links",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := versionInfo{Etcdmedic: etcdmedicVersion, LinkedEtcd: version.Version, Go: runtime.Version()}
			p, _ := printerFor(opts.writeOut)
			return p.Version(cmd.OutOrStdout(), info)
		},
	}
}
