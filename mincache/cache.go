package mincache

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// Options configures a Cache. The zero value is a cache with no tiers
// (every read misses, nothing is admitted).
type Options struct {
	MemBytes  int64        // memory tier budget; 0 = no memory tier
	DiskBytes int64        // disk tier budget; 0 = no disk tier
	Dir       string       // cache directory for the disk tier (required if DiskBytes > 0)
	Source    string       // the source's identity (backend String()); namespaces Dir
	Logger    *slog.Logger // nil = discard
}

// Cache is the two-tier no-eviction cache. All methods are safe for
// concurrent use; see the package documentation for its invariants.
type Cache struct {
	// immutable after Open
	mem    *memTier
	disk   *diskTier // nil without a disk tier
	logger *slog.Logger
}

// Open maps the memory arena and, with a disk tier, locks Dir's namespace
// for Source and loads (or rebuilds) its index. A namespace already open
// elsewhere fails with an error wrapping ErrLocked.
func Open(opts Options) (*Cache, error) {
	if opts.MemBytes < 0 || opts.DiskBytes < 0 {
		return nil, fmt.Errorf("mincache: negative budget (memory %d, disk %d)", opts.MemBytes, opts.DiskBytes)
	}
	if opts.DiskBytes > 0 && opts.Dir == "" {
		return nil, errors.New("mincache: a disk budget needs a cache directory")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	mem, err := newMemTier(opts.MemBytes)
	if err != nil {
		return nil, err
	}
	c := &Cache{mem: mem, logger: logger}
	if opts.DiskBytes > 0 {
		c.disk, err = openDiskTier(opts.DiskBytes, opts.Dir, opts.Source, logger)
		if err != nil {
			_ = mem.close()
			return nil, err
		}
	}
	return c, nil
}

// ReadAt copies bytes [off, off+len(p)) of item k into p. ok is false on a
// miss; a stored entry of the same Path+Chunk with another Version is
// invalidated (removed, its bytes no longer counted as hits) and reported as
// a miss; a disk entry that fails its checksum is dropped and reported as a
// miss. n = min(len(p), size-off). On a miss the contents of p are
// unspecified. A disk hit is promoted to memory when the arena has room.
func (c *Cache) ReadAt(k Key, p []byte, off int64) (n int, t Tier, ok bool) {
	if off < 0 {
		return 0, None, false
	}
	h, v := hashKey(k), hashVersion(k.Version)
	if c.mem.budget > 0 {
		n, hit, stale := c.mem.readAt(h, v, p, off)
		if hit {
			c.mem.ctr.hits.Add(1)
			c.mem.ctr.hitBytes.Add(int64(n))
			return n, Memory, true
		}
		if stale {
			c.mem.invalidate(h, v)
		}
		c.mem.ctr.misses.Add(1)
	}
	if c.disk == nil {
		return 0, None, false
	}
	n, ok = c.readDisk(k, h, v, p, off)
	if !ok {
		return 0, None, false
	}
	return n, Disk, true
}

func (c *Cache) readDisk(k Key, h keyHash, v uint64, p []byte, off int64) (int, bool) {
	d := c.disk
	e, hit, stale := d.lookup(h, v)
	if stale {
		d.invalidate(h, v)
	}
	if !hit {
		d.ctr.misses.Add(1)
		return 0, false
	}
	var n int
	if r, _, _ := c.mem.reserve(h, v, e.size); r != nil {
		// Promote: read the whole item straight into the arena, verified.
		if _, err := d.read(k, h, e, r.buf, 0); err != nil {
			r.abort()
			d.fail(h, e, err)
			d.ctr.misses.Add(1)
			return 0, false
		}
		if off < e.size {
			n = copy(p, r.buf[off:])
		}
		r.commit()
	} else {
		var err error
		if n, err = d.read(k, h, e, p, off); err != nil {
			d.fail(h, e, err)
			d.ctr.misses.Add(1)
			return 0, false
		}
	}
	d.ctr.hits.Add(1)
	d.ctr.hitBytes.Add(int64(n))
	return n, true
}

// Lookup reports the stored length of item k and its tier (None if
// absent). Like ReadAt, it invalidates an entry of another Version.
func (c *Cache) Lookup(k Key) (size int64, t Tier) {
	h, v := hashKey(k), hashVersion(k.Version)
	if size, hit, stale := c.mem.lookup(h, v); hit {
		return size, Memory
	} else if stale {
		c.mem.invalidate(h, v)
	}
	if c.disk != nil {
		if e, hit, stale := c.disk.lookup(h, v); hit {
			return e.size, Disk
		} else if stale {
			c.disk.invalidate(h, v)
		}
	}
	return 0, None
}

// Admit stores a copy of data under k if a tier has room: memory first,
// then disk. When a tier is full nothing more is admitted to it and nothing
// is evicted. It returns the tier that took it (or already holds it), or
// None. Admitting a key already present is a no-op; an entry of another
// Version is invalidated first. Admit never retains data.
func (c *Cache) Admit(k Key, data []byte) Tier {
	h, v := hashKey(k), hashVersion(k.Version)
	if _, hit, stale := c.mem.lookup(h, v); hit {
		return Memory
	} else if stale {
		c.mem.invalidate(h, v)
	}
	if c.disk != nil {
		if _, hit, stale := c.disk.lookup(h, v); hit {
			return Disk
		} else if stale {
			c.disk.invalidate(h, v)
		}
	}
	if c.mem.admit(h, v, data) {
		return Memory
	}
	if c.disk != nil && c.disk.admit(k, h, v, data) {
		return Disk
	}
	return None
}

// Drop empties both tiers (`stallfs cache drop`). Concurrent readers get
// misses or correct bytes, never bytes of another item.
func (c *Cache) Drop() error {
	err := c.mem.drop()
	if c.disk != nil {
		err = errors.Join(err, c.disk.drop())
	}
	return err
}

// Info reports the fill level and counters of both tiers.
func (c *Cache) Info() Info {
	in := Info{Memory: c.mem.info()}
	if c.disk != nil {
		in.Disk = c.disk.info()
		in.Dir = c.disk.dir
	}
	return in
}

// Close writes the disk index, releases the directory lock and unmaps the
// arena. Later calls miss and admit nothing. Close is idempotent.
func (c *Cache) Close() error {
	var err error
	if c.disk != nil {
		err = c.disk.close()
	}
	return errors.Join(err, c.mem.close())
}
