// Command build-etcd builds and caches real etcd binaries, kube-apiserver and SeaweedFS's weed:
//
//	go run ./internal/etcdbin/cmd/build-etcd v3.5.19 v3.6.16 kube-apiserver@v1.34.2 weed@v0.0.0-20261109003541-7506e5f91cd6
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
		if weed, ok := strings.CutPrefix(v, "weed@"); ok {
			build, v = etcdbin.WeedPath, weed
		}
		p, err := build(context.Background(), v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
	}
}
