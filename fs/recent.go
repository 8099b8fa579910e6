package fs

import (
	"log/slog"
	"sync"

	"github.com/stallfs/stallfs/mincache"
)

// recentItems keeps the last fetched items that the cache did not take, up
// to a byte budget, oldest dropped first. It lets the other parts of an
// item (the kernel reads at most 1 MiB at a time) and readahead be served
// without another backend read. It is a staging buffer, not a cache: it is
// small and it evicts, which the MinIO cache never does.
type recentItems struct {
	max int64 // immutable after newReader

	mu   sync.Mutex
	m    map[mincache.Key][]byte // guarded by mu
	fifo []mincache.Key          // guarded by mu; insertion order
	used int64                   // guarded by mu
}

func (c *recentItems) add(k mincache.Key, buf []byte) {
	if int64(len(buf)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[mincache.Key][]byte{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	for c.used+int64(len(buf)) > c.max && len(c.fifo) > 0 {
		old := c.fifo[0]
		c.fifo = c.fifo[1:]
		c.used -= int64(len(c.m[old]))
		delete(c.m, old)
	}
	c.m[k] = buf
	c.fifo = append(c.fifo, k)
	c.used += int64(len(buf))
}

// copyOut copies item k's bytes at off into dest if the item is held.
// Buffers are never written after add, so the copy runs outside the lock.
func (c *recentItems) copyOut(k mincache.Key, dest []byte, off int64) bool {
	c.mu.Lock()
	buf, ok := c.m[k]
	c.mu.Unlock()
	if !ok {
		return false
	}
	copy(dest, buf[off:])
	return true
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
