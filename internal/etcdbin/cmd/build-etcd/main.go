// Command build-etcd builds and caches real etcd binaries: go run ./internal/etcdbin/cmd/build-etcd v3.5.19 v3.6.16
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

func main() {
	for _, v := range os.Args[1:] {
		p, err := etcdbin.Path(context.Background(), v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
	}
}
