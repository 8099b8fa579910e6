package mincache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// Entry files of the disk tier: a self-describing header, then the data.
//
//	off  size  field
//	  0     4  magic "SFC1"
//	  4     4  header length H (data starts at H)
//	  8    16  keyHash (Path+Chunk)
//	 24     8  hashVersion(Version)
//	 32     8  Chunk
//	 40     8  data length
//	 48     4  block size (64 KiB)
//	 52     4  len(Path)
//	 56     4  len(Version)
//	 60     4  number of blocks
//	 64     .  Path, Version, one CRC32C per block
//	H-4     4  CRC32C of bytes [0, H-4)
//
// A reader verifies the header CRC, that the header names the key it
// looked up, that the file is long enough, and the CRC of every block it
// returns bytes from: a torn, truncated or flipped entry is never served.

const (
	entryMagic     = 0x31434653 // "SFC1" little-endian
	entryFixed     = 64
	entryBlockSize = 64 << 10
	// maxHeader bounds a header read during a rebuild scan (paths up to
	// 4 KiB, items up to 4 GiB).
	maxHeader = entryFixed + 2*4096 + 4*(1<<16) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks an entry that failed verification.
var errCorrupt = errors.New("corrupt cache entry")

// entryHeader is a parsed and verified header.
type entryHeader struct {
	h       keyHash
	ver     uint64
	chunk   int64
	size    int64
	path    string
	version string
	crcs    []uint32
	hdrLen  int64
}

func numBlocks(size int64) int64 { return (size + entryBlockSize - 1) / entryBlockSize }

// encodeHeader builds the header of an entry holding data.
func encodeHeader(k Key, h keyHash, v uint64, data []byte) []byte {
	nb := numBlocks(int64(len(data)))
	hl := entryFixed + len(k.Path) + len(k.Version) + 4*int(nb) + 4
	b := make([]byte, hl)
	le := binary.LittleEndian
	le.PutUint32(b[0:], entryMagic)
	le.PutUint32(b[4:], uint32(hl))
	copy(b[8:24], h[:])
	le.PutUint64(b[24:], v)
	le.PutUint64(b[32:], uint64(k.Chunk))
	le.PutUint64(b[40:], uint64(len(data)))
	le.PutUint32(b[48:], entryBlockSize)
	le.PutUint32(b[52:], uint32(len(k.Path)))
	le.PutUint32(b[56:], uint32(len(k.Version)))
	le.PutUint32(b[60:], uint32(nb))
	p := entryFixed
	p += copy(b[p:], k.Path)
	p += copy(b[p:], k.Version)
	for i := int64(0); i < nb; i++ {
		end := min((i+1)*entryBlockSize, int64(len(data)))
		le.PutUint32(b[p:], crc32.Checksum(data[i*entryBlockSize:end], castagnoli))
		p += 4
	}
	le.PutUint32(b[p:], crc32.Checksum(b[:p], castagnoli))
	return b
}

// parseHeader verifies and decodes a complete header.
func parseHeader(b []byte) (entryHeader, error) {
	le := binary.LittleEndian
	if len(b) < entryFixed+4 || le.Uint32(b[0:]) != entryMagic {
		return entryHeader{}, fmt.Errorf("bad magic: %w", errCorrupt)
	}
	hl := int64(le.Uint32(b[4:]))
	if hl != int64(len(b)) {
		return entryHeader{}, fmt.Errorf("header length %d, have %d: %w", hl, len(b), errCorrupt)
	}
	if crc32.Checksum(b[:hl-4], castagnoli) != le.Uint32(b[hl-4:]) {
		return entryHeader{}, fmt.Errorf("header checksum: %w", errCorrupt)
	}
	var e entryHeader
	copy(e.h[:], b[8:24])
	e.ver = le.Uint64(b[24:])
	e.chunk = int64(le.Uint64(b[32:]))
	e.size = int64(le.Uint64(b[40:]))
	pl, vl, nb := int64(le.Uint32(b[52:])), int64(le.Uint32(b[56:])), int64(le.Uint32(b[60:]))
	if le.Uint32(b[48:]) != entryBlockSize || e.size < 0 || nb != numBlocks(e.size) ||
		entryFixed+pl+vl+4*nb+4 != hl {
		return entryHeader{}, fmt.Errorf("inconsistent header: %w", errCorrupt)
	}
	p := int64(entryFixed)
	e.path = string(b[p : p+pl])
	p += pl
	e.version = string(b[p : p+vl])
	p += vl
	e.crcs = make([]uint32, nb)
	for i := range e.crcs {
		e.crcs[i] = le.Uint32(b[p:])
		p += 4
	}
	e.hdrLen = hl
	return e, nil
}

// readHeader reads and verifies the header of f. hdrLen is the header
// length recorded in the index, or 0 when unknown (rebuild scan).
func readHeader(f *os.File, hdrLen int64, read *int64) (entryHeader, error) {
	if hdrLen == 0 {
		var fixed [entryFixed]byte
		n, err := f.ReadAt(fixed[:], 0)
		*read += int64(n)
		if err != nil {
			return entryHeader{}, shortRead(err)
		}
		hdrLen = int64(binary.LittleEndian.Uint32(fixed[4:]))
	}
	if hdrLen < entryFixed+4 || hdrLen > maxHeader {
		return entryHeader{}, fmt.Errorf("header length %d: %w", hdrLen, errCorrupt)
	}
	b := make([]byte, hdrLen)
	n, err := f.ReadAt(b, 0)
	*read += int64(n)
	if err != nil {
		return entryHeader{}, shortRead(err)
	}
	return parseHeader(b)
}

// shortRead turns EOF inside an entry (a truncated or torn file) into errCorrupt.
func shortRead(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated: %w", errCorrupt)
	}
	return err
}

// scratch holds buffers for reads that do not start and end on block
// boundaries; they cannot go straight into the caller's buffer.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// readRange copies item bytes [off, off+len(p)) ∩ [0, size) of the entry
// open in f into p, verifying every block it touches. It returns the number
// of bytes copied.
func readRange(f *os.File, e *entryHeader, p []byte, off int64, read *int64) (int, error) {
	if off >= e.size || len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), e.size)
	b0 := off / entryBlockSize
	b1 := (end + entryBlockSize - 1) / entryBlockSize
	spanOff := b0 * entryBlockSize
	spanEnd := min(b1*entryBlockSize, e.size)
	span := spanEnd - spanOff

	var buf []byte
	direct := off == spanOff && end == spanEnd
	if direct {
		buf = p[:span]
	} else {
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		if int64(cap(*bp)) < span {
			*bp = make([]byte, span)
		}
		buf = (*bp)[:span]
	}
	n, err := f.ReadAt(buf, e.hdrLen+spanOff)
	*read += int64(n)
	if err != nil {
		return 0, shortRead(err)
	}
	for b := b0; b < b1; b++ {
		lo := (b - b0) * entryBlockSize
		hi := min(lo+entryBlockSize, span)
		if crc32.Checksum(buf[lo:hi], castagnoli) != e.crcs[b] {
			return 0, fmt.Errorf("block %d checksum: %w", b, errCorrupt)
		}
	}
	if direct {
		return int(span), nil
	}
	return copy(p, buf[off-spanOff:end-spanOff]), nil
}
