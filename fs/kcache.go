package fs

// The kernel-cache hit path (Options.KernelCache): the kernel keeps the
// pages of files and serves re-reads without asking the daemon, and the
// daemon, not the kernel's LRU, decides which pages it may keep. Measured
// in docs/architecture.md ("Hit path").
//
// Invariants (no-open mode):
//
//   - OPEN and FLUSH are answered ENOSYS, deliberately and only here:
//     the kernel then opens files of the connection without asking and
//     stops sending FLUSH; it sends no RELEASE either. Writes stay
//     refused: the mount is read-only in the kernel.
//   - No later open of a file is served pages of an item no tier held
//     when it was read: such pages are dropped at the file's next LOOKUP
//     (which every open sends, files having entry timeout 0), before the
//     LOOKUP is answered, and the pages of a file the tiers no longer hold
//     whole (cache drop, a changed version) likewise. So backend bytes per
//     epoch are D minus the bytes the tiers hold, as with direct I/O.
//   - Pages of non-tier items read and not yet dropped are bounded by
//     BufferBytes: past it the oldest go, from one goroutine (a
//     notification waits for the page locks of READs in flight, so it is
//     never sent from a READ).
//   - A LOOKUP of a file the tiers hold whole records its size as a hit
//     once; its READs' tier hits are then not recorded again.
//
// Lock order: kcache.mu before kcNode.mu (never both held: each is taken
// alone).

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stallfs/stallfs/mincache"
)

// Kernel-cache modes, decided once the kernel has sent INIT.
const (
	kcUndecided int32 = iota // before INIT is known: OPEN is answered as in fallback
	kcNoOpen                 // OPEN answered ENOSYS: no OPEN/FLUSH/RELEASE, pages kept
	kcFallback               // the kernel cannot open without OPEN: direct I/O
)

// kcache is a mount's kernel-cache state: the mode and the queue of pages
// of non-tier items still in the kernel's page cache.
type kcache struct {
	// immutable after newKcache
	log    *slog.Logger
	budget int64         // bytes of non-tier pages left to the kernel before invalidating the oldest
	ttl    time.Duration // entry timeout of regular files (0: every open sends LOOKUP)
	wake   chan struct{} // cap 1: the queue is over budget
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the drainer returns

	mode     atomic.Int32
	notifies atomic.Int64 // NotifyContent calls made (tests, logs)

	mu    sync.Mutex
	fifo  []*fileNode // guarded by mu; nodes with dirty pages, oldest first (may repeat)
	bytes int64       // guarded by mu; dirty bytes of the nodes in fifo
}

// kcNode is one file's kernel-cache state. The kernel has no file handle
// in this mode, so what was per open is per node.
type kcNode struct {
	// lookupHit: the last LOOKUP found every item of the file in a tier
	// and recorded the file's bytes as a hit; tier hits of its READs are
	// not recorded again.
	lookupHit atomic.Bool
	// kept: a READ was served from a tier (or admitted), so the kernel may
	// hold pages of it that are right only while the tier holds the item.
	kept atomic.Bool

	mu     sync.Mutex
	lo, hi int64 // guarded by mu; range of pages of non-tier items (hi == 0: none)
	n      int64 // guarded by mu; bytes counted in kcache.bytes
	queued bool  // guarded by mu; in kcache.fifo
}

func newKcache(o Options) *kcache {
	return &kcache{
		log:    o.Logger,
		budget: o.BufferBytes,
		ttl:    o.KernelCacheEntryTimeout,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
}

// noOpen reports whether OPEN is answered ENOSYS (and LOOKUP stands for it).
func (k *kcache) noOpen() bool { return k != nil && k.mode.Load() == kcNoOpen }

// decide sets the mode from the kernel's INIT flags and starts the drainer.
func (k *kcache) decide(kernelFlags uint64) {
	if kernelFlags&fuse.CAP_NO_OPEN_SUPPORT == 0 {
		k.mode.Store(kcFallback)
		k.log.Warn("kernel cache: this kernel cannot open files without OPEN (no FUSE_NO_OPEN_SUPPORT); serving with direct I/O")
		close(k.exited)
		return
	}
	k.mode.Store(kcNoOpen)
	go k.drain()
}

// stop ends the drainer and waits for it.
func (k *kcache) stop() {
	if k == nil || k.mode.Load() == kcUndecided {
		return
	}
	close(k.done)
	<-k.exited
}

// fileEntryTimeout is the entry timeout of a regular file's name.
func (m *Mount) fileEntryTimeout() time.Duration {
	if m.kc != nil && m.kc.mode.Load() != kcFallback {
		return m.kc.ttl
	}
	return m.opts.EntryTimeout
}

// lookedUp runs on every LOOKUP of a regular file in no-open mode, where a
// LOOKUP is the only request an open of a page-cached file sends: it drops
// pages the kernel must not keep (a non-tier item read since, or items the
// tier no longer holds: cache drop, a changed version), tells the
// prefetcher, and records the file's bytes as a hit when every item is in
// a tier (the kernel or a READ served from the tier will deliver them).
func (f *fileNode) lookedUp() {
	m, kc := f.m, f.kc
	m.kc.invalidate(f)
	mem, disk, whole := m.rd.tierBytes(&f.ref)
	if !whole && kc.kept.Swap(false) {
		m.kc.notify(f, 0, 0)
	}
	kc.lookupHit.Store(whole && f.ref.size > 0)
	if m.observer != nil {
		m.observer.Observe(f.ref.path)
	}
	if whole {
		m.rd.record(f.ref.id, tierSource(mincache.Memory), int(mem), 0)
		m.rd.record(f.ref.id, tierSource(mincache.Disk), int(disk), 0)
	}
}

// tierBytes reports how many bytes of f each tier holds and whether the
// tiers hold all of it.
func (r *reader) tierBytes(f *fileRef) (mem, disk int64, whole bool) {
	if r.o.cache == nil || f.size == 0 {
		return 0, 0, f.size == 0
	}
	items := int64(1)
	if f.size > r.o.chunk {
		items = (f.size + r.o.chunk - 1) / r.o.chunk
	}
	l, isLookuper := r.o.cache.(cacheLookuper)
	for k := range items {
		key, n := r.key(f, k), r.itemLen(f, k)
		t := mincache.None
		if isLookuper {
			_, t = l.Lookup(key)
		} else if _, tt, ok := r.o.cache.ReadAt(key, nil, 0); ok {
			t = tt
		}
		switch t {
		case mincache.Memory:
			mem += n
		case mincache.Disk:
			disk += n
		default:
			return mem, disk, false
		}
	}
	return mem, disk, true
}

// readNoHandle serves a READ in no-open mode and notes which pages the
// kernel may keep.
func (f *fileNode) readNoHandle(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, out, err := f.m.rd.readFor(ctx, &f.ref, readIn{
		// No daemon readahead in this mode: the kernel's own readahead
		// already sends READs ahead, concurrently, and the daemon's
		// readahead racing them fetched a chunk twice now and then
		// (TestKernelCacheLargeFile: 1 run in 8 under -race; 0 in 60
		// without it).
		seq:       nil,
		quietHits: f.kc.lookupHit.Load(),
	}, dest, off)
	if out.tier {
		f.kc.kept.Store(true)
	}
	if out.hi > out.lo {
		f.m.kc.dirty(f, out.lo, out.hi)
	}
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// dirty queues the pages [lo, hi) of f, which hold items no tier holds,
// for invalidation. They are not invalidated at once: the reader copies
// them out of the page cache only after the READ's reply, and pages
// dropped before that would be read again (from the backend, once the
// staging buffer has let go of the item). They go when the queue exceeds
// its budget, oldest first, or at the file's next LOOKUP, whichever comes
// first, so the kernel never serves a non-tier item to a later open.
func (k *kcache) dirty(f *fileNode, lo, hi int64) {
	kc := f.kc
	kc.mu.Lock()
	if kc.hi == 0 {
		kc.lo, kc.hi = lo, hi
	} else {
		kc.lo, kc.hi = min(kc.lo, lo), max(kc.hi, hi)
	}
	kc.n += hi - lo
	push := !kc.queued
	kc.queued = true
	kc.mu.Unlock()

	k.mu.Lock()
	if push {
		k.fifo = append(k.fifo, f)
	}
	k.bytes += hi - lo
	over := k.bytes > k.budget
	k.mu.Unlock()
	if over {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// take removes f's dirty range; dequeued says f left the fifo.
func (k *kcache) take(f *fileNode, dequeued bool) (lo, hi int64) {
	kc := f.kc
	kc.mu.Lock()
	lo, hi, n := kc.lo, kc.hi, kc.n
	kc.lo, kc.hi, kc.n = 0, 0, 0
	if dequeued {
		kc.queued = false
	}
	kc.mu.Unlock()
	if n != 0 {
		k.mu.Lock()
		k.bytes -= n
		k.mu.Unlock()
	}
	return lo, hi
}

// invalidate drops f's dirty pages now (at its LOOKUP). f stays in the
// fifo; the drainer finds nothing left to do for it.
func (k *kcache) invalidate(f *fileNode) {
	if lo, hi := k.take(f, false); hi > lo {
		k.notify(f, lo, hi-lo)
	}
}

// notify tells the kernel to drop f's pages in [off, off+n) (n == 0: to
// the end). A node the kernel has forgotten has no pages (ENOENT).
func (k *kcache) notify(f *fileNode, off, n int64) {
	k.notifies.Add(1)
	if errno := f.NotifyContent(off, n); errno != 0 && errno != syscall.ENOENT {
		k.log.Debug("kernel cache: invalidate pages", "path", f.ref.path, "off", off, "len", n, "err", errno)
	}
}

// drain invalidates the oldest dirty nodes while the queue is over its
// budget. It runs in its own goroutine: a notification waits for the
// page locks of READs in flight, so it must never be sent from a READ.
func (k *kcache) drain() {
	defer close(k.exited)
	for {
		select {
		case <-k.done:
			return
		case <-k.wake:
		}
		for {
			k.mu.Lock()
			if k.bytes <= k.budget || len(k.fifo) == 0 {
				if len(k.fifo) == 0 {
					k.fifo = nil // let the backing array go
				}
				k.mu.Unlock()
				break
			}
			f := k.fifo[0]
			k.fifo[0] = nil
			k.fifo = k.fifo[1:]
			k.mu.Unlock()
			if lo, hi := k.take(f, true); hi > lo {
				k.notify(f, lo, hi-lo)
			}
		}
	}
}

// flush invalidates every queued range now.
func (k *kcache) flush() {
	k.mu.Lock()
	fifo := k.fifo
	k.fifo = nil
	k.mu.Unlock()
	for _, f := range fifo {
		if lo, hi := k.take(f, true); hi > lo {
			k.notify(f, lo, hi-lo)
		}
	}
}

// DropKernelCache makes the kernel drop every page of the mount's files
// that it keeps in kernel-cache mode; call it after emptying the cache
// (`stallfs cache drop`) so that memory goes at once. (Correctness does not
// depend on it: the next LOOKUP of a file, which every open sends, drops
// its pages when the tiers no longer hold all of it.) It is a no-op
// without KernelCache.
func (m *Mount) DropKernelCache() {
	if !m.kc.noOpen() {
		return
	}
	m.kc.flush()
	m.eachFileNode(m.root.EmbeddedInode(), func(f *fileNode) {
		if f.kc.kept.Swap(false) {
			f.kc.lookupHit.Store(false)
			m.kc.notify(f, 0, 0)
		}
	})
}

// eachFileNode calls fn for every file node below dir that the kernel
// knows.
func (m *Mount) eachFileNode(dir *gofs.Inode, fn func(*fileNode)) {
	for _, ch := range dir.Children() {
		switch n := ch.Operations().(type) {
		case *fileNode:
			fn(n)
		case *dirNode:
			m.eachFileNode(ch, fn)
		}
	}
}
