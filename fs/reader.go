package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// Cache is the item cache the read path consults before the backend
// (mincache implements it). Implementations must be safe for concurrent use.
type Cache interface {
	// ReadAt copies len(p) bytes of item k starting at off into p. ok is
	// true only when all of p was filled, and t names the tier that served
	// it. A zero-length p asks whether k is cached without copying, unless
	// the cache also has Lookup(k mincache.Key) (int64, mincache.Tier),
	// which is then used instead.
	ReadAt(k mincache.Key, p []byte, off int64) (n int, t mincache.Tier, ok bool)
	// Admit offers a whole item; the cache may keep it (returning the tier
	// that took it) or not (mincache.None). It must not retain data.
	Admit(k mincache.Key, data []byte) mincache.Tier
}

// cacheLookuper is implemented by caches that can tell whether an item is
// present without reading it (mincache.Cache does; a zero-length ReadAt of a
// disk entry would also promote it to memory).
type cacheLookuper interface {
	Lookup(k mincache.Key) (size int64, t mincache.Tier)
}

// cached reports whether the cache holds item k.
func (r *reader) cached(k mincache.Key) bool {
	if l, ok := r.o.cache.(cacheLookuper); ok {
		_, t := l.Lookup(k)
		return t != mincache.None
	}
	_, _, ok := r.o.cache.ReadAt(k, nil, 0)
	return ok
}

// Recorder receives one or two calls per part of a read served from one
// item (the stats package implements it): a part is split when only some
// of its bytes are still a fetch's own (see fetchLedger). blocked is how
// long the reader waited for a fill; it is 0 for cache hits.
type Recorder interface {
	Read(file uint32, src stats.Source, n int64, blocked time.Duration)
}

// readerOptions are the read path's settings, defaults already applied.
type readerOptions struct {
	chunk     int64
	maxFills  int
	readahead int
	retries   int
	backoff   time.Duration
	buffer    int64
	cache     Cache
	recorder  Recorder
	log       *slog.Logger
}

// reader serves reads item by item: cache, recently fetched items, then one
// shared backend fill per item.
type reader struct {
	// immutable after newReader
	b    backend.Backend
	o    readerOptions
	life context.Context // fills run under it, not under a caller's ctx
	sem  chan struct{}   // bounds concurrent backend fills
	ra   chan struct{}   // bounds readahead goroutines; never waited on

	flights singleflight.Group
	recent  recentItems
	peer    peerState // see peers.go
	owed    owedItems
	errs    errOnce

	mu     sync.Mutex
	closed bool           // guarded by mu
	wg     sync.WaitGroup // fills and readahead; Add only under mu when !closed
}

func newReader(life context.Context, b backend.Backend, o readerOptions) *reader {
	r := &reader{
		b:    b,
		o:    o,
		life: life,
		sem:  make(chan struct{}, o.maxFills),
		ra:   make(chan struct{}, 4*max(o.readahead, 1)),
	}
	r.recent.max = o.buffer
	return r
}

// close waits for every fill and readahead to end. The caller cancels life
// first so they end promptly.
func (r *reader) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *reader) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// errClosed reports a read on a mount that is being unmounted.
var errClosed = errors.New("mount is closing")

// fileRef is what the read path needs of one regular file.
type fileRef struct {
	id      uint32
	path    string
	version string
	size    int64
}

// items returns the number of items of a file and the length of item k.
func (r *reader) itemLen(f *fileRef, k int64) int64 {
	if f.size <= r.o.chunk {
		return f.size
	}
	return min(r.o.chunk, f.size-k*r.o.chunk)
}

func (r *reader) key(f *fileRef, k int64) mincache.Key {
	return mincache.Key{Path: f.path, Version: f.version, Chunk: k}
}

// seqState tracks one open file's access pattern for readahead.
type seqState struct {
	last atomic.Int64 // last item read, -1 before the first read
	done atomic.Int64 // readahead was started up to this item
}

func newSeqState() *seqState {
	s := &seqState{}
	s.last.Store(-1)
	s.done.Store(-1)
	return s
}

// read fills dest from byte off of f. It returns fewer bytes than len(dest)
// only at EOF.
func (r *reader) read(ctx context.Context, f *fileRef, seq *seqState, dest []byte, off int64) (int, error) {
	n, _, err := r.readFor(ctx, f, readIn{seq: seq}, dest, off)
	return n, err
}

// readIn is how one read is to be served.
type readIn struct {
	seq *seqState // readahead state (nil: none)
	// quietHits leaves tier hits unrecorded: the kernel-cache mode
	// recorded the file's bytes at its LOOKUP already (see lookedUp).
	// Bytes still owed to a fetch are recorded all the same.
	quietHits bool
}

// readOut is what a read tells the kernel-cache mode about the pages it
// filled.
type readOut struct {
	tier   bool  // some part came from a tier, or was admitted to one
	lo, hi int64 // the file range of parts that no tier holds (hi == 0: none)
}

// readFor is read with per-read settings, reporting which of the bytes a
// tier holds.
func (r *reader) readFor(ctx context.Context, f *fileRef, in readIn, dest []byte, off int64) (int, readOut, error) {
	var out readOut
	if off >= f.size || len(dest) == 0 {
		return 0, out, nil
	}
	end := min(off+int64(len(dest)), f.size)
	pos := 0
	for off < end {
		k, inItem := int64(0), off
		if f.size > r.o.chunk {
			k, inItem = off/r.o.chunk, off%r.o.chunk
		}
		ilen := r.itemLen(f, k)
		part := dest[pos : pos+int(min(end-off, ilen-inItem))]
		held, err := r.readItem(ctx, f.id, r.key(f, k), ilen, part, inItem, in.quietHits)
		if err != nil {
			return pos, out, err
		}
		if held {
			out.tier = true
		} else {
			if out.hi == 0 {
				out.lo = off
			}
			out.hi = off + int64(len(part))
		}
		pos += len(part)
		off += int64(len(part))
		if in.seq != nil && f.size > r.o.chunk {
			r.maybeReadahead(f, in.seq, k)
		}
	}
	return pos, out, nil
}

// fillResult is what one backend fill hands to its waiters. buf is nil when
// the fill found the item already cached or staged.
type fillResult struct {
	buf  []byte
	tier mincache.Tier
	src  stats.Source // Backend or Peer
	led  *fetchLedger // the fetch's bytes not yet taken by a read
}

// readItem copies len(dest) bytes of item key, starting at offInItem, into
// dest. itemLen is the item's full length. held reports that a tier holds
// the item (it served the bytes, or this read's fill admitted it); with
// quietHits, tier hits are not recorded.
func (r *reader) readItem(ctx context.Context, file uint32, key mincache.Key, itemLen int64, dest []byte, offInItem int64, quietHits bool) (held bool, err error) {
	for attempt := 0; ; attempt++ {
		if r.o.cache != nil {
			if _, t, ok := r.o.cache.ReadAt(key, dest, offInItem); ok {
				// The rest of an item that a read's fill admitted is
				// still the backend's until read once.
				b, src, _ := r.owed.take(key, int64(len(dest)))
				r.record(file, src, int(b), 0)
				if !quietHits {
					r.record(file, tierSource(t), len(dest)-int(b), 0)
				}
				return true, nil
			}
		}
		if r.recent.copyOut(key, dest, offInItem) {
			b, src, ok := r.owed.take(key, int64(len(dest)))
			if !ok {
				// Staged by the prefetcher, or forgotten.
				b, src = int64(len(dest)), stats.Backend
			}
			r.record(file, src, int(b), 0)
			r.record(file, stats.Memory, len(dest)-int(b), 0)
			return false, nil
		}
		start := time.Now()
		// Stage the item for later reads only when this read does not
		// take all of it: a whole small file read at once is not kept
		// outside the cache, so what the cache did not admit costs a
		// backend read next time, as the MinIO accounting expects.
		stage := offInItem != 0 || int64(len(dest)) < itemLen
		res, err := r.join(ctx, key, itemLen, stage, true)
		if err != nil {
			return false, err
		}
		if res.buf == nil {
			if attempt == 0 {
				continue // cached or staged by another flight meanwhile: read it there
			}
			return false, fmt.Errorf("read %s: item vanished from the cache", keyString(key))
		}
		copy(dest, res.buf[offInItem:])
		r.recent.consume(key, len(dest))
		// Bytes beyond the fetch's (a second reader of this part joined
		// the fill) crossed the backend once: they are a hit of the fill.
		blocked := time.Since(start)
		b := res.led.take(int64(len(dest)))
		if res.led.left.Load() == 0 {
			r.owed.remove(key, res.led)
		}
		if b > 0 {
			r.record(file, res.src, int(b), blocked)
			blocked = 0
		}
		r.record(file, stats.Memory, len(dest)-int(b), blocked)
		return res.tier != mincache.None, nil
	}
}

func (r *reader) record(file uint32, src stats.Source, n int, blocked time.Duration) {
	if r.o.recorder != nil && n > 0 {
		r.o.recorder.Read(file, src, int64(n), blocked)
	}
}

func tierSource(t mincache.Tier) stats.Source {
	if t == mincache.Disk {
		return stats.Disk
	}
	return stats.Memory
}

func keyString(k mincache.Key) string {
	return k.Path + "\x00" + k.Version + "\x00" + strconv.FormatInt(k.Chunk, 10)
}

// fill joins or starts the one backend fill of key and waits for it, or
// for ctx (then it returns a context.Canceled error; the fill goes on).
// It is the prefetcher's: the bytes it fetches are counted as prefetched,
// not owed to the backend by later reads.
func (r *reader) fill(ctx context.Context, key mincache.Key, itemLen int64, stage bool) (fillResult, error) {
	return r.join(ctx, key, itemLen, stage, false)
}

// join is fill; with owe, a fill that this call starts leaves the bytes no
// waiter took owed to the backend when the cache admits the item (see
// owedItems).
func (r *reader) join(ctx context.Context, key mincache.Key, itemLen int64, stage, owe bool) (fillResult, error) {
	ch := r.flights.DoChan(keyString(key), func() (any, error) { return r.doFill(key, itemLen, stage, owe) })
	select {
	case res := <-ch:
		if res.Err != nil {
			return fillResult{}, res.Err
		}
		return res.Val.(fillResult), nil
	case <-ctx.Done():
		return fillResult{}, fmt.Errorf("read %s: %w", key.Path, context.Canceled)
	}
}

// doFill runs once per flight, under the mount's lifetime: it checks the
// cache again (another flight may have just admitted the item), takes a
// fill slot, reads the whole item with bounded retries and admits it; with
// stage, an item the cache did not take is kept in the recent buffer.
func (r *reader) doFill(key mincache.Key, itemLen int64, stage, owe bool) (fillResult, error) {
	if !r.begin() {
		return fillResult{}, errClosed
	}
	defer r.wg.Done()
	if r.o.cache != nil {
		if r.cached(key) {
			return fillResult{}, nil
		}
	}
	if r.recent.has(key) {
		// Staged by a flight that ended after this reader missed the
		// staging buffer (readahead, the prefetcher): read it there.
		return fillResult{}, nil
	}
	// Local tiers missed: the owner peer, else the backend.
	buf, src, err := r.load(key, itemLen)
	if err != nil {
		return fillResult{}, err
	}
	res := fillResult{buf: buf, src: src, led: newFetchLedger(itemLen, src)}
	if r.o.cache != nil && r.admits(key) {
		res.tier = r.o.cache.Admit(key, buf)
	}
	if res.tier == mincache.None && stage {
		// Not cached: keep it a while so the item's other parts (reads
		// are at most 1 MiB, items up to the chunk size) and readahead
		// find it.
		r.recent.add(key, buf)
	}
	if owe && (res.tier != mincache.None || (stage && r.recent.has(key))) {
		r.owed.add(key, res.led)
	}
	return res, nil
}

// fetch reads the whole item into buf from the backend, retrying errors
// that may pass (not missing, not stale, not short).
func (r *reader) fetch(key mincache.Key, buf []byte) error {
	off := key.Chunk * r.o.chunk
	var err error
	for try := 0; try <= r.o.retries; try++ {
		if try > 0 {
			t := time.NewTimer(r.o.backoff << (try - 1))
			select {
			case <-t.C:
			case <-r.life.Done():
				t.Stop()
				return fmt.Errorf("read %s@%d: %w (after %v)", key.Path, off, errClosed, err)
			}
		}
		var n int
		n, err = r.b.ReadAt(r.life, key.Path, key.Version, buf, off)
		if br, ok := r.o.recorder.(backendRecorder); ok {
			var rerr error
			if n != len(buf) || (err != nil && !errors.Is(err, io.EOF)) {
				rerr = cmpErr(err, io.ErrUnexpectedEOF)
			}
			br.BackendRequest(rerr, try > 0)
		}
		if n == len(buf) && (err == nil || errors.Is(err, io.EOF)) {
			return nil
		}
		if err == nil || errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s@%d: short read, %d of %d bytes: %w", key.Path, off, n, len(buf), io.ErrUnexpectedEOF)
		}
		err = fmt.Errorf("read %s@%d: %w", key.Path, off, err)
		if !retryable(err) || r.life.Err() != nil {
			return err
		}
	}
	return err
}

// backendRecorder is implemented by Recorders that count backend requests,
// errors and retries (stats.Recorder does).
type backendRecorder interface {
	BackendRequest(err error, retried bool)
}

// cmpErr returns err if it is an error, else alt.
func cmpErr(err, alt error) error {
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return alt
}

func retryable(err error) bool {
	return !errors.Is(err, backend.ErrStale) && !errors.Is(err, iofs.ErrNotExist) &&
		!errors.Is(err, iofs.ErrPermission) && !errors.Is(err, context.Canceled)
}

// maybeReadahead starts background fills of the items after k when the
// file is being read in order. It never blocks: when too many readaheads
// run, it skips.
func (r *reader) maybeReadahead(f *fileRef, seq *seqState, k int64) {
	last := seq.last.Swap(k)
	if r.o.readahead <= 0 || (last != k && last != k-1) {
		return
	}
	lastItem := (f.size - 1) / r.o.chunk
	to := min(k+int64(r.o.readahead), lastItem)
	for {
		done := seq.done.Load()
		if done >= to {
			return
		}
		if seq.done.CompareAndSwap(done, to) {
			for j := max(done+1, k+1); j <= to; j++ {
				r.prefetch(r.key(f, j), r.itemLen(f, j))
			}
			return
		}
	}
}

// prefetch fills one item in the background if a readahead slot is free.
func (r *reader) prefetch(key mincache.Key, itemLen int64) {
	if r.recent.has(key) {
		return
	}
	select {
	case r.ra <- struct{}{}:
	default:
		return
	}
	if !r.begin() {
		<-r.ra
		return
	}
	go func() {
		defer r.wg.Done()
		defer func() { <-r.ra }()
		select {
		case <-r.flights.DoChan(keyString(key), func() (any, error) { return r.doFill(key, itemLen, true, true) }):
		case <-r.life.Done():
		}
	}()
}

// fetchLedger counts the bytes of one fetch (from the backend or a peer)
// that no read has taken yet. The first itemLen bytes handed out from a
// fetch are its source's, whichever read takes them (a waiter of the fill,
// a later part from the recent buffer or, see owedItems, from the cache);
// bytes beyond them (a second reader of the same part joined the fill)
// crossed the network once and count as a memory hit of the fill. So the
// bytes read with source Backend equal the bytes fetched for reads, as an
// independent count of the backend's bytes sees them.
type fetchLedger struct {
	src  stats.Source // immutable
	left atomic.Int64
}

func newFetchLedger(n int64, src stats.Source) *fetchLedger {
	l := &fetchLedger{src: src}
	l.left.Store(n)
	return l
}

// take takes up to n of the bytes left and returns how many it took.
func (l *fetchLedger) take(n int64) int64 {
	for {
		left := l.left.Load()
		t := min(n, left)
		if t <= 0 {
			return 0
		}
		if l.left.CompareAndSwap(left, left-t) {
			return t
		}
	}
}

// owedMax bounds the owed ledgers kept; items admitted but never read
// through (a tar's header read alone) would otherwise pile up. When full,
// all are forgotten (as errOnce does): the rest of a forgotten item counts
// as a cache hit, or as the backend's when read from the recent buffer.
const owedMax = 4096

// owedItems holds the ledgers of items that a read's fill admitted to the
// cache or staged in the recent buffer: the later parts that readers take
// from there are the backend's until the item's fetched bytes were all
// taken once. The cache-hit path checks n without the lock; it is 0 in
// steady state (every item read through).
type owedItems struct {
	n  atomic.Int64 // len(m)
	mu sync.Mutex
	m  map[mincache.Key]*fetchLedger // guarded by mu
}

func (o *owedItems) add(k mincache.Key, l *fetchLedger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[mincache.Key]*fetchLedger{}
	}
	if len(o.m) >= owedMax {
		o.m = map[mincache.Key]*fetchLedger{}
		o.n.Store(0)
	}
	if _, ok := o.m[k]; !ok {
		o.n.Add(1)
	}
	o.m[k] = l
}

// take takes up to n owed bytes of item k and returns how many it took
// and their source; ok reports whether k had a ledger.
func (o *owedItems) take(k mincache.Key, n int64) (took int64, src stats.Source, ok bool) {
	if o.n.Load() == 0 {
		return 0, stats.Backend, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.m[k]
	if !ok {
		return 0, stats.Backend, false
	}
	took = l.take(n)
	if l.left.Load() == 0 {
		o.removeLocked(k, l)
	}
	return took, l.src, true
}

// remove forgets item k's ledger l once it has nothing left.
func (o *owedItems) remove(k mincache.Key, l *fetchLedger) {
	if o.n.Load() == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.removeLocked(k, l)
}

func (o *owedItems) removeLocked(k mincache.Key, l *fetchLedger) {
	if cur, ok := o.m[k]; ok && cur == l {
		delete(o.m, k)
		o.n.Add(-1)
	}
}
