package mincache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// The index file is an append-only log of fixed 48-byte records after a
// 16-byte magic line. Each admission appends an "add" record after its
// entry file is renamed into place; each invalidation or drop of a corrupt
// entry appends a "del" record. Close rewrites it compacted (temp + fsync +
// rename). Open replays it without touching any entry file; a torn tail
// record (crash mid-append) fails its CRC and is cut off. A missing or
// unreadable index is rebuilt from the entry files' headers.
//
//	off size field
//	  0    1 type (1 add, 2 del)
//	  4    4 entry header length
//	  8   16 keyHash
//	 24    8 version hash
//	 32    8 data length
//	 44    4 CRC32C of bytes [0, 44)

const (
	indexMagic = "stallfs-mcidx-1\n"
	recordSize = 48
	recAdd     = 1
	recDel     = 2
	indexName  = "index"
	indexTmp   = "index.tmp"
)

// errIndexCorrupt reports an index that cannot be replayed at all.
var errIndexCorrupt = errors.New("mincache: index is corrupt")

func encodeRecord(typ byte, h keyHash, e diskEntry) [recordSize]byte {
	var r [recordSize]byte
	le := binary.LittleEndian
	r[0] = typ
	le.PutUint32(r[4:], e.hdrLen)
	copy(r[8:24], h[:])
	le.PutUint64(r[24:], e.ver)
	le.PutUint64(r[32:], uint64(e.size))
	le.PutUint32(r[44:], crc32.Checksum(r[:44], castagnoli))
	return r
}

// loadIndex replays the index at path. valid is the length of the intact
// prefix (a torn tail beyond it is to be truncated).
func loadIndex(path string) (m map[keyHash]diskEntry, valid int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var magic [len(indexMagic)]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || string(magic[:]) != indexMagic {
		return nil, 0, fmt.Errorf("%s: bad magic: %w", path, errIndexCorrupt)
	}
	le := binary.LittleEndian
	m = make(map[keyHash]diskEntry, (st.Size()-int64(len(indexMagic)))/recordSize)
	valid = int64(len(indexMagic))
	var r [recordSize]byte
	for {
		if _, err := io.ReadFull(br, r[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return m, valid, nil
			}
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if crc32.Checksum(r[:44], castagnoli) != le.Uint32(r[44:]) {
			return m, valid, nil // torn tail
		}
		var h keyHash
		copy(h[:], r[8:24])
		switch r[0] {
		case recAdd:
			m[h] = diskEntry{ver: le.Uint64(r[24:]), size: int64(le.Uint64(r[32:])), hdrLen: le.Uint32(r[4:])}
		case recDel:
			if e, ok := m[h]; ok && e.ver == le.Uint64(r[24:]) {
				delete(m, h)
			}
		default:
			return nil, 0, fmt.Errorf("%s: record type %d: %w", path, r[0], errIndexCorrupt)
		}
		valid += recordSize
	}
}

// writeIndex atomically replaces the index at dir with a compacted one
// holding m, and returns it open for appending. With durable it is
// fsync'd before the rename (Close); otherwise a crash may leave the old
// index, whose stale records then read as vanished entries (misses).
func writeIndex(dir string, m map[keyHash]diskEntry, durable bool) (*os.File, error) {
	tmp := filepath.Join(dir, indexTmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mincache: write index: %w", err)
	}
	buf := make([]byte, 0, 1<<20)
	buf = append(buf, indexMagic...)
	for h, e := range m {
		r := encodeRecord(recAdd, h, e)
		buf = append(buf, r[:]...)
		if len(buf) >= 1<<20-recordSize {
			if _, err := f.Write(buf); err != nil {
				f.Close()
				return nil, fmt.Errorf("mincache: write index: %w", err)
			}
			buf = buf[:0]
		}
	}
	_, err = f.Write(buf)
	if err == nil && durable {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mincache: write index: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, indexName)); err != nil {
		f.Close()
		return nil, fmt.Errorf("mincache: write index: %w", err)
	}
	if durable {
		syncDir(dir)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("mincache: write index: %w", err)
	}
	return f, nil
}

// openIndexAppend opens an index whose first valid bytes are intact,
// cutting off a torn tail.
func openIndexAppend(path string, valid int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("mincache: open index: %w", err)
	}
	if err := f.Truncate(valid); err != nil {
		f.Close()
		return nil, fmt.Errorf("mincache: open index: %w", err)
	}
	if _, err := f.Seek(valid, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("mincache: open index: %w", err)
	}
	return f, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
