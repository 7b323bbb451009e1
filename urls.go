package etcdmedic

import (
	"slices"
	"strings"
)

// URLs are a member's peer or client URLs, as etcd lists them.
type URLs []string

// Normalize drops the scheme and a trailing slash, so that an endpoint given as
// "127.0.0.1:2379" matches a member's "http://127.0.0.1:2379".
func Normalize(url string) string {
	for _, scheme := range []string{"http://", "https://", "unix://", "unixs://"} {
		url = strings.TrimPrefix(url, scheme)
	}
	return strings.TrimSuffix(url, "/")
}

// Has reports whether url is one of these, written exactly so.
func (us URLs) Has(url string) bool { return slices.Contains(us, url) }

// Overlap reports whether any URL is in both lists, written exactly so: etcd compares peer
// URLs as strings when it matches a member.
func (us URLs) Overlap(other []string) bool {
	return slices.ContainsFunc(us, func(u string) bool { return slices.Contains(other, u) })
}

// Reaches reports whether endpoint is one of these URLs, scheme aside.
func (us URLs) Reaches(endpoint string) bool {
	key := Normalize(endpoint)
	return slices.ContainsFunc(us, func(u string) bool { return Normalize(u) == key })
}

// String joins the URLs with commas, as etcd's flags take them; "(none)" for no URL.
func (us URLs) String() string {
	if len(us) == 0 {
		return "(none)"
	}
	return strings.Join(us, ",")
}
