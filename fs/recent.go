package fs

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/stallfs/stallfs/mincache"
)

// recentItems keeps fetched items that the cache did not take until their
// bytes have been read once, up to a byte budget (oldest dropped first). It
// lets the other parts of an item (the kernel reads at most 1 MiB at a
// time) and readahead be served without another backend read. It is a
// staging buffer, not a cache: an item leaves once read through, so a later
// epoch reads it from the backend again, as the MinIO accounting expects.
type recentItems struct {
	max int64 // immutable after newReader

	mu   sync.Mutex
	m    map[mincache.Key]*staged // guarded by mu
	fifo []mincache.Key           // guarded by mu; insertion order
	used int64                    // guarded by mu
}

// staged is one held item. buf is never written after add.
type staged struct {
	buf  []byte
	left int64 // guarded by recentItems.mu; bytes not yet read
}

func (c *recentItems) add(k mincache.Key, buf []byte) {
	if int64(len(buf)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[mincache.Key]*staged{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	for c.used+int64(len(buf)) > c.max && len(c.fifo) > 0 {
		old := c.fifo[0]
		c.fifo = c.fifo[1:]
		if st, ok := c.m[old]; ok {
			c.used -= int64(len(st.buf))
			delete(c.m, old)
		}
	}
	c.m[k] = &staged{buf: buf, left: int64(len(buf))}
	if len(c.fifo) > 2*len(c.m)+64 {
		// Read-through items left their keys behind; drop those.
		c.fifo = slices.DeleteFunc(c.fifo, func(k mincache.Key) bool { _, ok := c.m[k]; return !ok })
	}
	c.fifo = append(c.fifo, k)
	c.used += int64(len(buf))
}

// copyOut copies item k's bytes at off into dest if the item is held.
// Buffers are never written after add, so the copy runs outside the lock.
func (c *recentItems) copyOut(k mincache.Key, dest []byte, off int64) bool {
	c.mu.Lock()
	st, ok := c.m[k]
	if ok {
		c.consumeLocked(k, st, len(dest))
	}
	c.mu.Unlock()
	if !ok {
		return false
	}
	copy(dest, st.buf[off:])
	return true
}

// consume counts n bytes of item k as read elsewhere (by the fill's own
// waiters).
func (c *recentItems) consume(k mincache.Key, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[k]; ok {
		c.consumeLocked(k, st, n)
	}
}

// consumeLocked drops the item once all its bytes were read. The fifo
// entry stays until it reaches the front; add skips it then.
func (c *recentItems) consumeLocked(k mincache.Key, st *staged, n int) {
	st.left -= int64(n)
	if st.left <= 0 {
		c.used -= int64(len(st.buf))
		delete(c.m, k)
	}
}

func (c *recentItems) has(k mincache.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[k]
	return ok
}

// errOnce logs a failed item once; hot-path errors are counted, not
// repeated in the log. It forgets everything when it has seen many items,
// so memory stays bounded.
type errOnce struct {
	mu   sync.Mutex
	seen map[mincache.Key]struct{} // guarded by mu
}

const errOnceMax = 10000

func (e *errOnce) log(l *slog.Logger, k mincache.Key, err error) {
	e.mu.Lock()
	if e.seen == nil || len(e.seen) >= errOnceMax {
		e.seen = map[mincache.Key]struct{}{}
	}
	_, dup := e.seen[k]
	e.seen[k] = struct{}{}
	e.mu.Unlock()
	if !dup {
		l.Warn("backend read failed", "path", k.Path, "chunk", k.Chunk, "err", err)
	}
}
