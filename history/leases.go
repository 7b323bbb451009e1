package history

import (
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// expiryFrom maps each lease whose keys may be gone by the final read to the earliest time its
// expiry could have deleted them: a lease left to expire (or whose keep-alive stream broke)
// from the first put with it; a lease kept alive until the workload stopped only when the final
// read came a whole TTL after the stop, from the stop. Leases not in the map must hold their
// keys to the end.
func expiryFrom(h *workload.History) map[int64]time.Time {
	from := map[int64]time.Time{}
	for _, l := range h.Leases {
		switch {
		case !l.KeptAlive:
			from[l.ID] = h.Start
		case h.Final != nil && !h.End.IsZero() && h.Final.At.Sub(h.End) >= time.Duration(l.TTL)*time.Second:
			from[l.ID] = h.End
		}
	}
	return from
}
