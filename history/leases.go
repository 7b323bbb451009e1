package history

import (
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// expiryFrom maps each lease whose keys may be gone by the final read to the earliest time its
// expiry could have deleted them: a lease left to expire from the first put with it; a lease kept alive until the workload stopped only when the final
// read came a whole TTL after the stop, from the stop. A kept-alive lease whose stream broke
// early may expire from a TTL before it broke. Leases not in the map must hold their
// keys to the end.
func expiryFrom(h *workload.History) map[int64]time.Time {
	from := map[int64]time.Time{}
	for _, l := range h.Leases {
		switch {
		case !l.KeptAlive && !l.LostAt.IsZero():
			// Its keep-alive stream ended at LostAt: either no answer for a whole TTL, or the
			// lease gone after a renewal less than a TTL before. Either way it was alive a TTL
			// before, and could not expire earlier.
			from[l.ID] = h.Start
			if early := l.LostAt.Add(-time.Duration(l.TTL) * time.Second); early.After(h.Start) {
				from[l.ID] = early
			}
		case !l.KeptAlive:
			from[l.ID] = h.Start
		case h.Final != nil && !h.End.IsZero() && h.Final.At.Sub(h.End) >= time.Duration(l.TTL)*time.Second:
			from[l.ID] = h.End
		}
	}
	return from
}
