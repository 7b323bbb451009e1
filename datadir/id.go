package datadir

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// ID is a cluster or member ID. etcd prints them in hex (etcdctl -w table, logs, bbolt keys),
// so etcdmedic does too, in tables and in JSON.
type ID uint64

func (id ID) String() string { return strconv.FormatUint(uint64(id), 16) }

func (id ID) MarshalJSON() ([]byte, error) { return json.Marshal(id.String()) }

func (id *ID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseID(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses a member or cluster ID written in hex, as etcd writes them.
func ParseID(s string) (ID, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parse ID %q: want hex such as 8e9e05c52164694d", s)
	}
	return ID(v), nil
}
