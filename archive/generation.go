package archive

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"slices"
	"time"
)

// A generation is one unbroken stretch of a cluster's history, as Litestream has them: every
// full backup and every segment of history a backup run stores carries the generation of that
// run, and a restore replays onto a full backup only the history of its own generation. A
// cluster restored to an earlier point goes on with revisions of the same numbers but other
// changes: a new generation (a new run, or a run whose cluster went back) keeps the two
// histories apart, where revision numbers alone would splice them.
//
// The empty generation is what etcdmedic wrote before generations: full backups without one
// replay only segments without one (history/<from>-<to>.events), and where two of those
// segments hold the same revision they must agree (pointEvents), or the restore fails.
//
// A generation's name is when it started and 4 random bytes: 20261203T100000Z-3fa9c1d2.
type Generation = string

var generationPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$`)

// NewGeneration names a new generation, started now.
func NewGeneration() Generation {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// lineage is one generation's full backups (oldest first, as List returns them) and segments.
type lineage struct {
	generation Generation
	entries    []Entry
	segs       []Segment
}

// lineages splits the store's backups and history by generation, in the order the generations'
// first backups were taken. A segment whose generation has no backup is in no lineage: no
// restore can start from it.
func lineages(entries []Entry, segs []Segment) []lineage {
	var out []lineage
	index := map[Generation]int{}
	for _, e := range entries {
		i, ok := index[e.Generation]
		if !ok {
			i = len(out)
			index[e.Generation] = i
			out = append(out, lineage{generation: e.Generation})
		}
		out[i].entries = append(out[i].entries, e)
	}
	for _, s := range segs {
		if i, ok := index[s.Generation]; ok {
			out[i].segs = append(out[i].segs, s)
		}
	}
	return slices.Clip(out)
}
