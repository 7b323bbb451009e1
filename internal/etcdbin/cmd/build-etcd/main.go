// Command build-etcd builds and caches real etcd binaries, and kube-apiserver:
//
//	go run ./internal/etcdbin/cmd/build-etcd v3.5.19 v3.6.16 kube-apiserver@v1.34.2
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

func main() {
	for _, v := range os.Args[1:] {
		build := etcdbin.Path
		if kube, ok := strings.CutPrefix(v, "kube-apiserver@"); ok {
			build, v = etcdbin.KubeAPIServerPath, kube
		}
		p, err := build(context.Background(), v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
	}
}
