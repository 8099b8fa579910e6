package fs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"time"
	"unsafe"
)

// The persisted tree (Options.MetadataFile) is the tree's own arrays,
// little-endian, behind a header and followed by a CRC32C of every byte
// before it:
//
//	magic "STLFTREE", format u32, flags u32 (0)
//	source: u32 length + bytes (Backend.String of the listed source)
//	listedAt i64 (unix ns, when the listing began), bytes i64
//	nStrs, nEnts, nDirs, nFiles, nLinks u32
//	strs    nStrs bytes (the arena)
//	ents    nEnts x 36 bytes: name.off, name.n u32, size, mtime i64, mode, parent, ref u32
//	dirs    nDirs x 16 bytes: ent, first, count, nsub u32
//	fileVer nFiles x 8 bytes: off, n u32
//	links   nLinks x 8 bytes: off, n u32
//	crc32c  u32
//
// fileEnt is not stored: it is the inverse of the files' refs. A file is
// written to a unique temporary name beside the target and renamed over
// it, so concurrent writers (two mounts of one source) never interleave
// and a reader sees a whole old or a whole new file. Loading checks the
// length against the counts before allocating, the checksum, then every
// reference and range (checkTree), so a damaged or foreign file is
// refused and never becomes a wrong tree.

const (
	treeMagic   = "STLFTREE"
	treeFormat  = 1
	entRecLen   = 36
	dirRecLen   = 16
	srefRecLen  = 8
	fixedHdrLen = 8 + 4 + 4 + 4 + 8 + 8 + 5*4
)

// Reasons a persisted tree is refused; each wraps into the load error.
var (
	errTreeFormat  = errors.New("not a stallfs metadata file of this format")
	errTreeSource  = errors.New("metadata file is of another source")
	errTreeCorrupt = errors.New("metadata file is corrupt")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// persistedTree is a tree loaded from a metadata file, with what is known about its listing.
type persistedTree struct {
	t        *tree
	source   string
	listedAt int64 // unix ns
}

// saveTree writes t as the metadata file at name for source, listed from
// listedAt on.
func saveTree(name, source string, listedAt int64, t *tree) (err error) {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save tree: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save tree: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	if err := encodeTree(w, source, listedAt, t); err != nil {
		return fmt.Errorf("save tree %s: %w", f.Name(), err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("save tree %s: %w", f.Name(), err)
	}
	if _, err := f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return fmt.Errorf("save tree %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save tree %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save tree %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return fmt.Errorf("save tree: %w", err)
	}
	removeStaleTemps(name)
	return nil
}

// staleTempAge is the age after which a temporary metadata file is taken
// for the leftover of a crashed writer rather than another mount's write in
// progress.
const staleTempAge = time.Hour

// removeStaleTemps removes the temporary files of name that crashed
// writers left behind.
func removeStaleTemps(name string) {
	tmps, _ := filepath.Glob(name + ".tmp-*")
	for _, p := range tmps {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > staleTempAge {
			_ = os.Remove(p)
		}
	}
}

// encodeTree writes everything but the checksum.
func encodeTree(w *bufio.Writer, source string, listedAt int64, t *tree) error {
	le := binary.LittleEndian
	b := make([]byte, 0, fixedHdrLen+len(source))
	b = append(b, treeMagic...)
	b = le.AppendUint32(b, treeFormat)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(len(source)))
	b = append(b, source...)
	b = le.AppendUint64(b, uint64(listedAt))
	b = le.AppendUint64(b, uint64(t.bytes))
	for _, n := range []int{len(t.strs), len(t.ents), len(t.dirs), len(t.fileVer), len(t.links)} {
		b = le.AppendUint32(b, uint32(n))
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if _, err := w.WriteString(t.strs); err != nil {
		return err
	}
	rec := make([]byte, 0, entRecLen)
	for i := range t.ents {
		e := &t.ents[i]
		rec = le.AppendUint32(rec[:0], e.name.off)
		rec = le.AppendUint32(rec, e.name.n)
		rec = le.AppendUint64(rec, uint64(e.size))
		rec = le.AppendUint64(rec, uint64(e.mtime))
		rec = le.AppendUint32(rec, uint32(e.mode))
		rec = le.AppendUint32(rec, e.parent)
		rec = le.AppendUint32(rec, e.ref)
		if _, err := w.Write(rec); err != nil {
			return err
		}
	}
	for _, d := range t.dirs {
		rec = le.AppendUint32(rec[:0], d.ent)
		rec = le.AppendUint32(rec, d.first)
		rec = le.AppendUint32(rec, d.count)
		rec = le.AppendUint32(rec, d.nsub)
		if _, err := w.Write(rec); err != nil {
			return err
		}
	}
	for _, refs := range [][]sref{t.fileVer, t.links} {
		for _, r := range refs {
			rec = le.AppendUint32(rec[:0], r.off)
			rec = le.AppendUint32(rec, r.n)
			if _, err := w.Write(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// crcReader hashes everything read through it.
type crcReader struct {
	r io.Reader
	h hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

// loadTree reads the metadata file at name. It returns an error satisfying
// iofs.ErrNotExist when there is none, wrapping errTreeFormat,
// errTreeSource or errTreeCorrupt when it cannot be used for source.
func loadTree(name, source string) (*persistedTree, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("load tree: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load tree: %w", err)
	}
	if st.Size() < 4 {
		return nil, fmt.Errorf("load tree %s: %d bytes: %w", name, st.Size(), errTreeFormat)
	}
	// The body is hashed as it is decoded; the checksum is the last 4 bytes.
	cr := &crcReader{r: io.LimitReader(f, st.Size()-4), h: crc32.New(castagnoli)}
	r := bufio.NewReaderSize(cr, 1<<20)
	tf, err := decodeTree(r, st.Size(), source)
	if err != nil {
		return nil, fmt.Errorf("load tree %s: %w", name, err)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("load tree %s: data after the tree: %w", name, errTreeCorrupt)
	}
	tail := make([]byte, 4)
	if _, err := f.ReadAt(tail, st.Size()-4); err != nil {
		return nil, fmt.Errorf("load tree %s: %w", name, err)
	}
	if binary.LittleEndian.Uint32(tail) != cr.h.Sum32() {
		return nil, fmt.Errorf("load tree %s: checksum mismatch: %w", name, errTreeCorrupt)
	}
	if err := checkTree(tf.t); err != nil {
		return nil, fmt.Errorf("load tree %s: %w: %w", name, errTreeCorrupt, err)
	}
	return tf, nil
}

// readRecords reads n records of size bytes in chunks and hands each
// chunk to decode with the index of its first record.
func readRecords(r io.Reader, n, size int, decode func(b []byte, first int)) error {
	const chunk = 4096 // records
	buf := make([]byte, min(n, chunk)*size)
	for first := 0; first < n; first += chunk {
		b := buf[:min(n-first, chunk)*size]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("%w: %w", errTreeCorrupt, err)
		}
		decode(b, first)
	}
	return nil
}

// decodeTree reads the header and arrays; size is the file's length, which
// must match the counts before anything is allocated for them.
func decodeTree(r *bufio.Reader, size int64, source string) (*persistedTree, error) {
	le := binary.LittleEndian
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("header: %w: %w", errTreeFormat, err)
	}
	if string(hdr[:8]) != treeMagic || le.Uint32(hdr[8:]) != treeFormat || le.Uint32(hdr[12:]) != 0 {
		return nil, fmt.Errorf("magic %q format %d: %w", hdr[:8], le.Uint32(hdr[8:]), errTreeFormat)
	}
	srcLen := int64(le.Uint32(hdr[16:]))
	if srcLen > size {
		return nil, fmt.Errorf("source name of %d bytes: %w", srcLen, errTreeCorrupt)
	}
	src := make([]byte, srcLen)
	if _, err := io.ReadFull(r, src); err != nil {
		return nil, fmt.Errorf("header: %w: %w", errTreeCorrupt, err)
	}
	if string(src) != source {
		return nil, fmt.Errorf("listed from %q: %w", src, errTreeSource)
	}
	rest := make([]byte, 8+8+5*4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, fmt.Errorf("header: %w: %w", errTreeCorrupt, err)
	}
	tf := &persistedTree{source: source, listedAt: int64(le.Uint64(rest))}
	t := &tree{bytes: int64(le.Uint64(rest[8:]))}
	nStrs, nEnts, nDirs, nFiles, nLinks := int64(le.Uint32(rest[16:])), int64(le.Uint32(rest[20:])),
		int64(le.Uint32(rest[24:])), int64(le.Uint32(rest[28:])), int64(le.Uint32(rest[32:]))
	want := fixedHdrLen + srcLen + nStrs + nEnts*entRecLen + nDirs*dirRecLen + (nFiles+nLinks)*srefRecLen + 4
	if want != size {
		return nil, fmt.Errorf("length %d, the header's counts make %d: %w", size, want, errTreeCorrupt)
	}
	strs := make([]byte, nStrs)
	if _, err := io.ReadFull(r, strs); err != nil {
		return nil, fmt.Errorf("names: %w: %w", errTreeCorrupt, err)
	}
	// strs is never written again: the arena string shares its memory
	// instead of doubling a large allocation.
	t.strs = unsafe.String(unsafe.SliceData(strs), len(strs))
	t.ents = make([]entry, nEnts)
	err := readRecords(r, len(t.ents), entRecLen, func(b []byte, first int) {
		for i := range t.ents[first : first+len(b)/entRecLen] {
			rec := b[i*entRecLen:]
			t.ents[first+i] = entry{
				name:   sref{off: le.Uint32(rec), n: le.Uint32(rec[4:])},
				size:   int64(le.Uint64(rec[8:])),
				mtime:  int64(le.Uint64(rec[16:])),
				mode:   iofs.FileMode(le.Uint32(rec[24:])),
				parent: le.Uint32(rec[28:]),
				ref:    le.Uint32(rec[32:]),
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("entries: %w", err)
	}
	t.dirs = make([]dirRec, nDirs)
	err = readRecords(r, len(t.dirs), dirRecLen, func(b []byte, first int) {
		for i := range t.dirs[first : first+len(b)/dirRecLen] {
			rec := b[i*dirRecLen:]
			t.dirs[first+i] = dirRec{ent: le.Uint32(rec), first: le.Uint32(rec[4:]), count: le.Uint32(rec[8:]), nsub: le.Uint32(rec[12:])}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("directories: %w", err)
	}
	t.fileVer = make([]sref, nFiles)
	t.links = make([]sref, nLinks)
	for _, refs := range [][]sref{t.fileVer, t.links} {
		err = readRecords(r, len(refs), srefRecLen, func(b []byte, first int) {
			for i := range refs[first : first+len(b)/srefRecLen] {
				rec := b[i*srefRecLen:]
				refs[first+i] = sref{off: le.Uint32(rec), n: le.Uint32(rec[4:])}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("versions and links: %w", err)
		}
	}
	tf.t = t
	return tf, nil
}
