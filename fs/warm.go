package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"strings"

	"github.com/stallfs/stallfs/mincache"
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
// dropped; Warm of an item still staged fetches it again and holds it for
// one more read. Warm reports whether anything was fetched from the backend. It
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
		if r.o.cache != nil && r.cached(key) {
			continue
		}
		ilen := r.itemLen(&f, k)
		if r.recent.has(key) {
			// Staged for a read that has not come yet: the prefetcher
			// runs into the next epoch and the item is in both. Fetch it
			// again for the later read, as the MinIO accounting expects
			// (staging is not a cache), and hold it for one more read;
			// else the first read drops it and the later one misses.
			if err := r.refetch(ctx, key, ilen); err != nil {
				return fetched, err
			}
			fetched = true
			if pr, ok := r.o.recorder.(prefetchRecorder); ok {
				pr.Prefetched(id, ilen)
			}
			continue
		}
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

// refetch reads staged item key again (from its owner peer or the
// backend, as any fill) and holds the item for one more read, staging the
// new copy if the held one was read through meanwhile. It runs as the
// key's flight, so a reader that misses meanwhile waits on it instead of
// fetching a second copy.
func (r *reader) refetch(ctx context.Context, key mincache.Key, ilen int64) error {
	ch := r.flights.DoChan(keyString(key), func() (any, error) {
		if !r.begin() {
			return fillResult{}, errClosed
		}
		defer r.wg.Done()
		buf, src, err := r.load(key, ilen)
		if err != nil {
			return fillResult{}, err
		}
		if !r.recent.rearm(key) {
			r.recent.add(key, buf)
		}
		return fillResult{buf: buf, src: src, led: newFetchLedger(ilen, src)}, nil
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return fmt.Errorf("warm %s: %w", key.Path, ctx.Err())
	}
}

// rearm holds staged item k for one more full read and reports whether k
// was staged.
func (c *recentItems) rearm(k mincache.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[k]
	if ok {
		st.left += int64(len(st.buf))
	}
	return ok
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
