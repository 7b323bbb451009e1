package main

import (
	"fmt"
	"io"
)

// tablePrinter writes results for a person at a terminal.
type tablePrinter struct{}

func (tablePrinter) Version(w io.Writer, v versionInfo) error {
	_, err := fmt.Fprintf(w, "etcdmedic: %s\nlinked etcd: %s\ngo: %s\n", v.Etcdmedic, v.LinkedEtcd, v.Go)
	return err
}
