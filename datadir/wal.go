package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// WAL record types (etcd server/v3/storage/wal/wal.go).
const (
	recordMetadata = 1
	recordEntry    = 2
	recordState    = 3
	recordCRC      = 4
	recordSnapshot = 5
)

const (
	frameHeaderBytes = 8
	sectorBytes      = 512
	// maxRecordBytes bounds one record so a corrupt length field cannot make us allocate
	// gigabytes; etcd's own limit is the segment size (64 MiB).
	maxRecordBytes = 128 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// WALSegment is one member/wal/<seq>-<index>.wal file.
type WALSegment struct {
	Name  string `json:"name"`
	Seq   uint64 `json:"seq"`
	Index uint64 `json:"index"` // raft index the segment starts after
	Bytes int64  `json:"bytes"`
}

// TailProblem says how the end of the WAL looked when it was not a clean end of records.
type TailProblem struct {
	// InvalidFrom is, for an "invalid-log" tail, the index of the first entry that does not
	// continue the log (its term below the entry before it, or an index gap); Newest says it is
	// in the newest segment, where cutting it loses no later segment.
	InvalidFrom uint64 `json:"invalidFrom,omitempty"`
	Newest      bool   `json:"newest,omitempty"`
	Segment     string `json:"segment"`
	Offset      int64  `json:"offset"`
	Kind        string `json:"kind"` // "torn-write", "crc-mismatch", "truncated", "undecodable", "invalid-log", "missing-segment"
	Detail      string `json:"detail"`
}

// walRecord is one decoded record. Data aliases the reader's buffer: it is valid until the
// next call. When Skipped, only the start of a large entry was read (Data holds that start);
// its payload was neither read nor CRC-checked.
type walRecord struct {
	Type    int64
	Data    []byte
	Skipped bool
	// Segment and Offset say where the record starts; Newest is set in the newest segment.
	Segment string
	Offset  int64
	Newest  bool
}

// bigRecordBytes: records larger than this are entries carrying user data (membership
// records are tiny), so a quick read skips their payload instead of reading it.
const bigRecordBytes = 64 << 10

// headBytes is how much of a skipped record is read: the record's type and CRC, and the
// entry's type, term and index.
const headBytes = 96

// listWALSegments returns the WAL segments in order, or an error naming a file that cannot be
// read as one.
func listWALSegments(dir string) ([]WALSegment, error) {
	segs, _, err := listWAL(dir)
	return segs, err
}

// listWAL lists a WAL dir as etcd does (storage/wal/util.go readWALNames, checkWALNames): a
// .wal file whose name is not <seq>-<index>.wal is ignored ("ignored file in WAL directory"),
// and returned in ignored; a symlinked segment is followed, as etcd opens it. A sequence gap
// is not an error here: walGap names it.
func listWAL(dir string) (segs []WALSegment, ignored []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".wal") {
			continue // .tmp files of a segment being cut, lock files
		}
		seq, index, ok := parseWALName(name)
		if !ok {
			ignored = append(ignored, name)
			continue
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, fmt.Errorf("WAL file %s: %w", name, err)
		}
		if !info.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("WAL file %s is not a regular file", name)
		}
		segs = append(segs, WALSegment{Name: name, Seq: seq, Index: index, Bytes: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Seq < segs[j].Seq })
	return segs, ignored, nil
}

// parseWALName is etcd's parseWALName.
func parseWALName(name string) (seq, index uint64, ok bool) {
	_, err := fmt.Sscanf(name, "%016x-%016x.wal", &seq, &index)
	return seq, index, err == nil && strings.HasSuffix(name, ".wal")
}

// walGap returns the number of segments before the first break in their sequence (all of them
// if there is none), and the problem naming the missing sequence. etcd refuses such a WAL: the
// segment after the gap starts with the CRC of the missing one (ValidSnapshotEntries fails
// with ErrCRCMismatch, selectWALFiles with "file sequence numbers ... do not increase
// continuously").
func walGap(segs []WALSegment) (int, *TailProblem) {
	for i := 1; i < len(segs); i++ {
		if segs[i].Seq != segs[i-1].Seq+1 {
			missing := fmt.Sprintf("%016x", segs[i-1].Seq+1)
			if segs[i].Seq > segs[i-1].Seq+2 {
				missing += fmt.Sprintf(" to %016x", segs[i].Seq-1)
			}
			return i, &TailProblem{Segment: segs[i].Name, Kind: "missing-segment",
				Detail: fmt.Sprintf("WAL segment sequence %s is missing between %s and %s: etcd refuses to open this WAL; the entries from %s on are not read", missing, segs[i-1].Name, segs[i].Name, segs[i].Name)}
		}
	}
	return len(segs), nil
}

// walReader decodes records across segments the way etcd does: a zero length or the end of a
// file moves to the next segment; each record's CRC chains from the previous one. Unless full,
// it skips the payload of large entries (trusting their stored CRC as the chain's next link),
// so that reading costs in proportion to the number of records, not to the data in them; the
// last record of the newest segment, where a crash leaves damage, is always checked in full.
type walReader struct {
	src  io.ReaderAt
	name string
	size int64
	off  int64
	crc  uint32
	last bool // the newest segment: only there is a torn write expected after a crash
	full bool // read and check every record
	win  window
}

// window serves byte ranges of a file from one buffer, refilled with one pread when a range
// falls outside it.
type window struct {
	buf     []byte
	off     int64
	n       int
	scratch []byte
}

func (w *walReader) at(off int64, n int) ([]byte, error) {
	win := &w.win
	if off >= win.off && off+int64(n) <= win.off+int64(win.n) {
		return win.buf[off-win.off : off-win.off+int64(n)], nil
	}
	if n > 256<<10 {
		if cap(win.scratch) < n {
			win.scratch = make([]byte, n)
		}
		b := win.scratch[:n]
		_, err := io.ReadFull(io.NewSectionReader(w.src, off, int64(n)), b)
		return b, err
	}
	if win.buf == nil {
		win.buf = make([]byte, 256<<10)
	}
	// Reading on from the window's end fills all of it; a jump (over a skimmed payload) reads
	// one small block, so skimming large entries does not read their payload after all.
	fill := win.buf
	if off != win.off+int64(win.n) && n <= 4096 {
		fill = win.buf[:4096]
	}
	m, err := w.src.ReadAt(fill, off)
	win.off, win.n = off, m
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return win.buf[:m], err
	}
	return win.buf[:n], nil
}

// frameAt reads a frame header: the record's length and padding; ok is false at the end of
// the segment (end of file, or preallocated zeros).
func (w *walReader) frameAt(off int64) (recBytes, padBytes int64, ok bool, err error) {
	if off >= w.size {
		return 0, 0, false, nil
	}
	hdr, err := w.at(off, frameHeaderBytes)
	if err != nil {
		for _, b := range hdr {
			if b != 0 {
				return 0, 0, false, w.problem("truncated", fmt.Sprintf("frame header cut short after %d of 8 bytes", len(hdr)))
			}
		}
		return 0, 0, false, nil
	}
	l := binary.LittleEndian.Uint64(hdr)
	if l == 0 {
		return 0, 0, false, nil
	}
	recBytes, padBytes = decodeFrameSize(int64(l))
	return recBytes, padBytes, true, nil
}

// next returns the next record, io.EOF at the end of the segment, or a *TailProblem.
func (w *walReader) next() (walRecord, error) {
	recBytes, padBytes, ok, err := w.frameAt(w.off)
	if err != nil {
		return walRecord{}, err
	}
	if !ok {
		return walRecord{}, io.EOF
	}
	if recBytes > maxRecordBytes || recBytes+padBytes > w.size-w.off-frameHeaderBytes {
		return walRecord{}, w.problem("truncated", fmt.Sprintf("record of %d bytes runs past the end of the file", recBytes))
	}
	if !w.full && recBytes > bigRecordBytes {
		if rec, ok := w.skim(recBytes, padBytes); ok {
			return rec, nil
		}
	}
	buf, err := w.at(w.off+frameHeaderBytes, int(recBytes+padBytes))
	if err != nil {
		return walRecord{}, w.problem("truncated", "record cut short: "+err.Error())
	}
	typ, crc, data, err := parseRecord(buf[:recBytes])
	if err != nil {
		if w.tornWrite(buf) {
			return walRecord{}, w.problem("torn-write", "a sector of the last record is all zeros (write interrupted by a crash)")
		}
		return walRecord{}, w.problem("undecodable", "record does not decode: "+err.Error())
	}
	if typ == recordCRC {
		// A segment starts with the CRC of everything before it. Reading may start at any
		// segment, so only check it against a running CRC we already have.
		if w.crc != 0 && crc != w.crc {
			return walRecord{}, w.problem("crc-mismatch", fmt.Sprintf("segment starts with CRC %08x, previous segment ended with %08x", crc, w.crc))
		}
		w.crc = crc
	} else {
		want := crc32.Update(w.crc, crcTable, data)
		if crc != want {
			if w.tornWrite(buf) {
				return walRecord{}, w.problem("torn-write", "a sector of the last record is all zeros (write interrupted by a crash)")
			}
			return walRecord{}, w.problem("crc-mismatch", fmt.Sprintf("record CRC %08x, expected %08x", crc, want))
		}
		w.crc = crc
	}
	start := w.off
	w.off += frameHeaderBytes + recBytes + padBytes
	return walRecord{Type: typ, Data: data, Segment: w.name, Offset: start, Newest: w.last}, nil
}

// skim reads only the start of a large entry record. It declines (ok false) when the record
// is not a plain normal entry, or is the last one of the newest segment: those are read whole.
func (w *walReader) skim(recBytes, padBytes int64) (walRecord, bool) {
	nextOff := w.off + frameHeaderBytes + recBytes + padBytes
	if w.last {
		if _, _, more, err := w.frameAt(nextOff); err != nil || !more {
			return walRecord{}, false
		}
	}
	head, err := w.at(w.off+frameHeaderBytes, headBytes)
	if err != nil {
		return walRecord{}, false
	}
	typ, crc, data, err := parseRecord(head)
	if err != nil && !errors.Is(err, errCutShort) || typ != recordEntry {
		return walRecord{}, false
	}
	if et, _, _, _, ok := parseEntry(data); !ok || et != entryNormal {
		return walRecord{}, false
	}
	w.crc = crc // trusted: the next fully read record is checked against it
	start := w.off
	w.off = nextOff
	return walRecord{Type: typ, Data: data, Skipped: true, Segment: w.name, Offset: start, Newest: w.last}, true
}

var errCutShort = errors.New("cut short")

// parseRecord decodes a walpb.Record (type 1, crc 2, data 3) without copying its data. From a
// record's first bytes only, it returns what it found and errCutShort.
func parseRecord(b []byte) (typ int64, crc uint32, data []byte, err error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && wt == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, 0, nil, protowire.ParseError(m)
			}
			typ, b = int64(v), b[m:]
		case num == 2 && wt == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, 0, nil, protowire.ParseError(m)
			}
			crc, b = uint32(v), b[m:]
		case num == 3 && wt == protowire.BytesType:
			l, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, 0, nil, protowire.ParseError(m)
			}
			b = b[m:]
			if uint64(len(b)) < l {
				return typ, crc, b, errCutShort
			}
			data, b = b[:l], b[l:]
		default:
			m := protowire.ConsumeFieldValue(num, wt, b)
			if m < 0 {
				return 0, 0, nil, protowire.ParseError(m)
			}
			b = b[m:]
		}
	}
	return typ, crc, data, nil
}

const (
	entryNormal     = 0
	entryConfChange = 1
)

// parseEntry decodes a raftpb.Entry (type 1, term 2, index 3, data 4) without copying its
// payload; from an entry's first bytes it still returns type, term and index (ok is false
// only when those are not there).
func parseEntry(b []byte) (typ, term, index uint64, payload []byte, ok bool) {
	haveIndex := false
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if wt == protowire.VarintType && num <= 3 {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				break
			}
			b = b[m:]
			switch num {
			case 1:
				typ = v
			case 2:
				term = v
			case 3:
				index, haveIndex = v, true
			}
			continue
		}
		if num == 4 && wt == protowire.BytesType {
			l, m := protowire.ConsumeVarint(b)
			if m < 0 {
				break
			}
			b = b[m:]
			if uint64(len(b)) < l {
				payload = b
				break
			}
			payload, b = b[:l], b[l:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, wt, b)
		if m < 0 {
			break
		}
		b = b[m:]
	}
	return typ, term, index, payload, haveIndex && term > 0
}

func (w *walReader) problem(kind, detail string) *TailProblem {
	return &TailProblem{Segment: w.name, Offset: w.off, Kind: kind, Detail: detail}
}

func (p *TailProblem) Error() string {
	return fmt.Sprintf("WAL %s at offset %d: %s: %s", p.Segment, p.Offset, p.Kind, p.Detail)
}

// tornWrite reports whether any 512-byte sector of the record is all zeros: etcd's test for a
// write that a crash interrupted (wal/decoder.go isTornEntry). Only the newest segment can end so.
func (w *walReader) tornWrite(data []byte) bool {
	if !w.last {
		return false
	}
	fileOff := w.off + frameHeaderBytes
	for cur := 0; cur < len(data); {
		chunk := int(sectorBytes - fileOff%sectorBytes)
		if chunk > len(data)-cur {
			chunk = len(data) - cur
		}
		allZero := true
		for _, b := range data[cur : cur+chunk] {
			if b != 0 {
				allZero = false
				break
			}
		}
		if allZero {
			return true
		}
		cur += chunk
		fileOff += int64(chunk)
	}
	return false
}

func decodeFrameSize(lenField int64) (recBytes, padBytes int64) {
	recBytes = int64(uint64(lenField) & ^(uint64(0xff) << 56))
	if lenField < 0 {
		padBytes = int64((uint64(lenField) >> 56) & 0x7)
	}
	return recBytes, padBytes
}

// readWALRecords calls fn for every record of segs, in order. It stops at the first problem
// and returns it as a *TailProblem (records before it were delivered).
func readWALRecords(dir string, segs []WALSegment, full bool, fn func(walRecord) error) error {
	var crc uint32
	for i, seg := range segs {
		f, err := os.Open(filepath.Join(dir, seg.Name))
		if err != nil {
			return fmt.Errorf("open WAL segment: %w", err)
		}
		w := &walReader{src: f, name: seg.Name, size: seg.Bytes, crc: crc, last: i == len(segs)-1, full: full}
		for {
			rec, err := w.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return err
			}
			if err := fn(rec); err != nil {
				f.Close()
				return err
			}
		}
		crc = w.crc
		f.Close()
	}
	return nil
}
