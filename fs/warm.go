package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"strings"
)

// Observer is told which file a reader opened, with the file's path
// relative to the source root (the prefetcher implements it to track the
// reader's position in the predicted order). Observe must not block.
type Observer interface {
	Observe(path string)
}

// SetObserver sets the Observer told of every open. It may be called only
// from Options.BeforeMount, before any open.
func (m *Mount) SetObserver(o Observer) { m.observer = o }

// prefetchRecorder is implemented by Recorders that count bytes fetched
// ahead of the readers (stats.Recorder does).
type prefetchRecorder interface {
	Prefetched(file uint32, n int64)
}

// Warm fetches every item of the file at path that is neither cached nor
// staged, through the same shared fill as reads: a reader that arrives
// while the fill runs waits on it instead of starting a second one. An item
// the cache does not admit is staged until it has been read once, then
// dropped. Warm reports whether anything was fetched from the backend. It
// implements prefetch.Warmer.
func (m *Mount) Warm(ctx context.Context, path string) (fetched bool, err error) {
	id, ok := m.FileID(strings.TrimPrefix(path, "/"))
	if !ok {
		return false, fmt.Errorf("warm %s: %w", path, iofs.ErrNotExist)
	}
	f := m.fileRef(id)
	r := m.rd
	items := int64(1)
	if f.size > r.o.chunk {
		items = (f.size + r.o.chunk - 1) / r.o.chunk
	}
	for k := int64(0); k < items; k++ {
		key := r.key(&f, k)
		if r.recent.has(key) || (r.o.cache != nil && r.cached(key)) {
			continue
		}
		ilen := r.itemLen(&f, k)
		res, err := r.fill(ctx, key, ilen, true)
		if err != nil {
			return fetched, err
		}
		if res.buf != nil {
			fetched = true
			if pr, ok := r.o.recorder.(prefetchRecorder); ok {
				pr.Prefetched(id, ilen)
			}
		}
	}
	return fetched, nil
}

// Size returns the size of the file at path; the prefetcher uses it to
// bound the bytes it runs ahead.
func (m *Mount) Size(path string) (int64, bool) {
	id, ok := m.FileID(strings.TrimPrefix(path, "/"))
	if !ok {
		return 0, false
	}
	return m.SizeOf(id), true
}

// fileRef builds the read path's reference to file id.
func (m *Mount) fileRef(id uint32) fileRef {
	e := m.tree.fileEnt[id]
	return fileRef{
		id:      id,
		path:    m.tree.pathOf(e),
		version: m.tree.str(m.tree.fileVer[id]),
		size:    m.tree.ents[e].size,
	}
}
