package kubeworkload

import (
	"fmt"
	"strings"
)

// Kind is what kind of object a name is.
type Kind string

const (
	ConfigMap Kind = "configmap"
	Secret    Kind = "secret"
)

// State is an object's content as written: its value and the resourceVersion its write got.
// A nil *State is an absent object.
type State struct {
	Data string `json:"data"`
	RV   string `json:"resourceVersion,omitempty"`
}

func (s *State) String() string {
	if s == nil {
		return "absent"
	}
	return fmt.Sprintf("%q at resourceVersion %s", s.Data, s.RV)
}

// object is one name a client writes, and what the apiserver acknowledged of it.
type object struct {
	Kind Kind
	Name string
	// Known is the last acknowledged state (nil: absent: never created, or deleted).
	Known *State
	// Candidates, when set, are the states the object may be in after an operation that was
	// refused unexpectedly or whose outcome is unknown; it is read again before the next one.
	Candidates []*State
}

func (o *object) String() string { return string(o.Kind) + "/" + o.Name }

func (o *object) uncertain() bool { return len(o.Candidates) > 0 }

// mayBe reports whether seen is a state o may be in (values are unique, so the value alone
// names the write).
func (o *object) mayBe(seen *State) bool {
	states := o.Candidates
	if len(states) == 0 {
		states = []*State{o.Known}
	}
	for _, s := range states {
		if (s == nil) == (seen == nil) && (s == nil || s.Data == seen.Data) {
			return true
		}
	}
	return false
}

func (o *object) expected() string {
	states := o.Candidates
	if len(states) == 0 {
		states = []*State{o.Known}
	}
	var parts []string
	for _, s := range states {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, " or ")
}
