package datadir

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
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
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
	Kind    string `json:"kind"` // "torn-write", "crc-mismatch", "truncated", "undecodable"
	Detail  string `json:"detail"`
}

// walRecord is one decoded, CRC-checked record.
type walRecord struct {
	Type int64
	Data []byte
}

// listWALSegments returns the WAL segments in order, or an error naming the bad file.
func listWALSegments(dir string) ([]WALSegment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []WALSegment
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".wal") {
			continue // .tmp files of a segment being cut, lock files
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("WAL file %s is not a regular file", name)
		}
		var seq, index uint64
		if _, err := fmt.Sscanf(name, "%016x-%016x.wal", &seq, &index); err != nil {
			return nil, fmt.Errorf("WAL file %s: name is not <seq>-<index>.wal", name)
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		segs = append(segs, WALSegment{Name: name, Seq: seq, Index: index, Bytes: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Seq < segs[j].Seq })
	for i := 1; i < len(segs); i++ {
		if segs[i].Seq != segs[i-1].Seq+1 {
			return segs, fmt.Errorf("WAL segments are not contiguous: %s follows %s", segs[i].Name, segs[i-1].Name)
		}
	}
	return segs, nil
}

// walReader decodes records across segments the way etcd does: a zero length or the end of a
// file moves to the next segment; each record's CRC chains from the previous one.
type walReader struct {
	r    *bufio.Reader
	name string
	off  int64
	size int64
	crc  uint32
	last bool // the newest segment: only there is a torn write expected after a crash
}

// next returns the next record, io.EOF at the end of the segment, or a *TailProblem.
func (w *walReader) next() (walRecord, error) {
	var hdr [frameHeaderBytes]byte
	n, err := io.ReadFull(w.r, hdr[:])
	if err == io.EOF || (err == nil && binary.LittleEndian.Uint64(hdr[:]) == 0) {
		return walRecord{}, io.EOF // end of file or of preallocated (zeroed) space
	}
	if err != nil {
		return walRecord{}, w.problem("truncated", fmt.Sprintf("frame header cut short after %d of 8 bytes", n))
	}
	recBytes, padBytes := decodeFrameSize(int64(binary.LittleEndian.Uint64(hdr[:])))
	if recBytes > maxRecordBytes || recBytes+padBytes > w.size-w.off-frameHeaderBytes {
		return walRecord{}, w.problem("truncated", fmt.Sprintf("record of %d bytes runs past the end of the file", recBytes))
	}
	buf := make([]byte, recBytes+padBytes)
	if _, err := io.ReadFull(w.r, buf); err != nil {
		return walRecord{}, w.problem("truncated", "record cut short: "+err.Error())
	}
	var rec walpb.Record
	if err := proto.Unmarshal(buf[:recBytes], &rec); err != nil {
		if w.tornWrite(buf) {
			return walRecord{}, w.problem("torn-write", "a sector of the last record is all zeros (write interrupted by a crash)")
		}
		return walRecord{}, w.problem("undecodable", "record does not decode: "+err.Error())
	}
	if rec.GetType() == recordCRC {
		// A segment starts with the CRC of everything before it. Reading may start at any
		// segment, so only check it against a running CRC we already have.
		if w.crc != 0 && rec.GetCrc() != w.crc {
			return walRecord{}, w.problem("crc-mismatch", fmt.Sprintf("segment starts with CRC %08x, previous segment ended with %08x", rec.GetCrc(), w.crc))
		}
		w.crc = rec.GetCrc()
	} else {
		w.crc = crc32.Update(w.crc, crcTable, rec.Data)
		if rec.GetCrc() != w.crc {
			if w.tornWrite(buf) {
				return walRecord{}, w.problem("torn-write", "a sector of the last record is all zeros (write interrupted by a crash)")
			}
			return walRecord{}, w.problem("crc-mismatch", fmt.Sprintf("record CRC %08x, expected %08x", rec.GetCrc(), w.crc))
		}
	}
	w.off += frameHeaderBytes + recBytes + padBytes
	return walRecord{Type: rec.GetType(), Data: rec.Data}, nil
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

// readWALRecords calls fn for every valid record of every segment, in order. It stops at the
// first problem and returns it as a *TailProblem (records before it were delivered).
func readWALRecords(dir string, segs []WALSegment, fn func(walRecord) error) error {
	var crc uint32
	for i, seg := range segs {
		f, err := os.Open(filepath.Join(dir, seg.Name))
		if err != nil {
			return fmt.Errorf("open WAL segment: %w", err)
		}
		w := &walReader{r: bufio.NewReaderSize(f, 256<<10), name: seg.Name, size: seg.Bytes, crc: crc, last: i == len(segs)-1}
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
