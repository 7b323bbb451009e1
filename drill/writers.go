package drill

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/ledger"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// writers are several clients writing at once, each with its own ledger.
type writers struct {
	once    sync.Once
	clients []*clientv3.Client
	ledgers []*ledger.Ledger
}

func startWriters(ctx context.Context, sb *sandbox.Sandbox) (*writers, error) {
	w := &writers{}
	for i := range powerCutWriters {
		cli, err := clientv3.New(clientv3.Config{Endpoints: sb.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			w.stop()
			return nil, err
		}
		w.clients = append(w.clients, cli)
		l, err := ledger.Start(ctx, cli, ledger.Spec{Prefix: fmt.Sprintf("drill/w%d/", i), Rate: powerCutRate, RequestTimeout: time.Second})
		if err != nil {
			w.stop()
			return nil, err
		}
		w.ledgers = append(w.ledgers, l)
	}
	return w, nil
}

// stop stops every writer and closes its client; it is safe to call more than once.
func (w *writers) stop() {
	w.once.Do(func() {
		for _, l := range w.ledgers {
			l.Stop()
		}
		for _, c := range w.clients {
			c.Close()
		}
	})
}

// acked is every write any writer saw acknowledged.
func (w *writers) acked() []ledger.Write {
	var out []ledger.Write
	for _, l := range w.ledgers {
		out = append(out, l.Acked()...)
	}
	return out
}
