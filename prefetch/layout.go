package prefetch

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
)

// Layout maps dataset indices to file paths (relative to the mount root,
// slash-separated, no leading slash) and back. It is immutable and safe
// for concurrent use.
//
// Memory: the paths live in one string with uint32 end offsets, and the
// reverse lookup is an open-addressing table of int32 indices, so a
// layout costs the path bytes plus about 12 bytes per path.
type Layout struct {
	data string
	ends []uint32 // ends[i] is the end of path i in data; path i starts at ends[i-1]

	seed  maphash.Seed
	table []int32 // open addressing, -1 empty; size a power of two >= 2n
}

// layoutBuilder accumulates paths for a Layout.
type layoutBuilder struct {
	buf  strings.Builder // String() does not copy
	ends []uint32
	err  error
}

func (b *layoutBuilder) add(p string) {
	if b.err != nil {
		return
	}
	if b.buf.Len()+len(p) > math.MaxUint32 || len(b.ends) >= math.MaxInt32-1 {
		b.err = fmt.Errorf("layout: more than 4 GiB of paths or 2^31 files")
		return
	}
	b.buf.WriteString(p)
	b.ends = append(b.ends, uint32(b.buf.Len()))
}

func (b *layoutBuilder) build() (*Layout, error) {
	if b.err != nil {
		return nil, b.err
	}
	l := &Layout{data: b.buf.String(), ends: b.ends, seed: maphash.MakeSeed()}
	b.buf.Reset()
	b.ends = nil
	n := len(l.ends)
	size := 1
	for size < 2*n {
		size <<= 1
	}
	l.table = make([]int32, size)
	for i := range l.table {
		l.table[i] = -1
	}
	mask := uint64(size - 1)
	for i := range n {
		h := maphash.String(l.seed, l.Path(i)) & mask
		for {
			j := l.table[h]
			if j < 0 {
				l.table[h] = int32(i)
				break
			}
			if l.Path(int(j)) == l.Path(i) {
				break // a duplicate path keeps its first index
			}
			h = (h + 1) & mask
		}
	}
	return l, nil
}

// NewLayout returns the layout whose index i is paths[i]. A path that
// appears twice maps back to its first index.
func NewLayout(paths []string) (*Layout, error) {
	var b layoutBuilder
	total := 0
	for _, p := range paths {
		total += len(p)
	}
	if total <= math.MaxUint32 {
		b.buf.Grow(total)
	}
	b.ends = make([]uint32, 0, len(paths))
	for _, p := range paths {
		b.add(p)
	}
	return b.build()
}

// Len is the number of items.
func (l *Layout) Len() int { return len(l.ends) }

// Path returns the path of item i (0 <= i < Len()); it does not allocate.
func (l *Layout) Path(i int) string {
	start := uint32(0)
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.data[start:l.ends[i]]
}

// Index returns the first index whose path is p.
func (l *Layout) Index(p string) (int, bool) {
	if len(l.table) == 0 {
		return 0, false
	}
	mask := uint64(len(l.table) - 1)
	h := maphash.String(l.seed, p) & mask
	for {
		j := l.table[h]
		if j < 0 {
			return 0, false
		}
		if l.Path(int(j)) == p {
			return int(j), true
		}
		h = (h + 1) & mask
	}
}

// Bytes is the approximate memory the layout holds.
func (l *Layout) Bytes() int64 {
	return int64(len(l.data)) + 4*int64(len(l.ends)) + 4*int64(len(l.table))
}
