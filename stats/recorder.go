package stats

import (
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lock order: mu before busyMu. The hot path (Read) takes neither, except
// busyMu for reads that blocked (cache misses, which are slow anyway).

// Options configures a Recorder. The zero value works: no metrics, no
// per-file table and no automatic epoch detection.
type Options struct {
	// Registry receives the stallfs_* metrics (nil: no metrics).
	Registry *prometheus.Registry
	// Files is the number of files in the dataset; file IDs are 0..Files-1.
	// 0 disables the per-file table and automatic epoch detection.
	Files int
	// DatasetBytes is the dataset's total size (for hit-rate optimum and what-if).
	DatasetBytes int64
	// CacheBytes is the total cache budget over all tiers (for the MinIO-optimal
	// hit rate and the what-if's current row).
	CacheBytes int64
	// PathOf names a file ID when rendering top files (nil: IDs are shown).
	PathOf func(id uint32) string
	// SizeOf gives a file's size so that a file read in several parts counts
	// as read once per epoch; a read of a file whose bytes in the current
	// epoch already reached its size is a re-read. Nil or a negative answer:
	// every repeated Read call of a file in an epoch is a re-read. It is
	// called on the hot path and must be cheap and lock-free.
	SizeOf func(id uint32) int64
	// CacheFill reports the current fill of each cache tier (nil: none).
	CacheFill func() []TierFill
	// Logger receives epoch boundaries (nil: discard).
	Logger *slog.Logger
}

// TierFill is the fill of one cache tier.
type TierFill struct {
	// Tier names the tier ("memory", "disk").
	Tier string `json:"tier"`
	// UsedBytes is the bytes admitted to the tier.
	UsedBytes int64 `json:"used_bytes"`
	// BudgetBytes is the tier's byte budget.
	BudgetBytes int64 `json:"budget_bytes"`
	// Items is the number of items in the tier.
	Items int64 `json:"items"`
}

// Recorder accounts every read of a mount. All methods are safe for
// concurrent use; a nil *Recorder records nothing.
type Recorder struct {
	// immutable after New
	opts       Options
	log        *slog.Logger
	files      []fileEntry
	shards     []shard
	groupFiles []uint64 // files per epoch-detection group
	groupBits  int
	liveGroups uint64 // groups with at least one file
	passFiles  int64  // files a full pass reads (the non-empty ones)
	warmBytes  int64  // cache fill at New: the optimum of the first epoch

	// hot path state, atomics; every read loads these, and they change
	// only at epoch boundaries, so they sit on lines of their own
	_          [64]byte
	epochSeq   atomic.Uint64 // internal epoch sequence, starts at 1; tags derive from it
	epochNum   atomic.Int64  // displayed number of the current epoch
	epochStart atomic.Int64  // unix ns of the current epoch's first read; 0: none yet
	explicit   atomic.Bool   // SetEpoch was called: no automatic boundaries
	_          [64]byte

	groupsDone atomic.Uint64 // tag<<32 | groups whose files were all read this epoch
	requests   atomic.Uint64
	errors     atomic.Uint64
	retries    atomic.Uint64

	// busyMu guards the unions of blocked intervals.
	busyMu sync.Mutex
	busy   busyState

	// mu guards the epoch rows and the counters at the current epoch's start.
	mu       sync.Mutex
	rows     []EpochRow // closed epochs, oldest first, at most maxEpochRows
	dropped  int        // closed epochs dropped from rows
	closed   int        // closed epochs with reads, ever
	base     counters   // totals when the current epoch started
	maxClose int64      // largest blocked ns over closed epochs
	closedS  float64    // seconds of every closed epoch, dropped rows included
}

// maxEpochRows bounds the epoch rows kept.
const maxEpochRows = 1000

// busyState is the union of the wall-clock intervals [end-blocked, end] of
// blocked reads. Reads are recorded at their end under busyMu with a clock
// read inside the lock, so ends arrive in order and the union is exact.
type busyState struct {
	allUntil     int64 // unix ns
	allNs        int64 // union of every blocked read
	backendUntil int64
	backendNs    int64 // union of blocked backend reads
	backendBytes int64 // bytes of blocked backend reads
	backendReads int64 // blocked backend reads: misses the reader waited for
}

// New returns a Recorder, registering its metrics in opts.Registry.
func New(opts Options) *Recorder {
	r := &Recorder{opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.shards = make([]shard, numShards)
	r.groupBits = groupBitsFor(opts.Files)
	r.groupFiles = make([]uint64, 1<<r.groupBits)
	if opts.Files > 0 {
		r.files = make([]fileEntry, opts.Files)
		for id := range uint32(opts.Files) {
			// Empty files are never read; a full pass does not wait for them.
			if opts.SizeOf == nil || opts.SizeOf(id) != 0 {
				r.groupFiles[r.groupIndex(id)]++
				r.passFiles++
			}
		}
	}
	for _, n := range r.groupFiles {
		if n > 0 {
			r.liveGroups++
		}
	}
	if opts.CacheFill != nil {
		for _, t := range opts.CacheFill() {
			r.warmBytes += t.UsedBytes
		}
	}
	r.epochSeq.Store(1)
	r.epochNum.Store(1)
	if opts.Registry != nil {
		opts.Registry.MustRegister(newCollector(r))
	}
	return r
}

// Read records one item-part of a read: file's ID, where its n bytes came
// from, and how long the reader blocked waiting for data that was in no
// cache tier (0 for memory and disk hits; a reader that joined another's
// fetch reports Memory bytes with its wait). It does not allocate and takes
// no lock unless blocked > 0.
func (r *Recorder) Read(file uint32, src Source, n int64, blocked time.Duration) {
	if r == nil || src >= numSources {
		return
	}
	if n < 0 {
		n = 0
	}
	if blocked < 0 {
		blocked = 0
	}
	sh := &r.shards[shardOf(file)]
	var e *fileEntry
	var g group
	var st epochStep
	if int(file) < len(r.files) {
		e, g = &r.files[file], r.groupOf(file)
		size := int64(-1)
		if r.opts.SizeOf != nil {
			size = r.opts.SizeOf(file)
		}
		st = r.enterEpoch(e, g, n, size)
	}
	if r.epochStart.Load() == 0 {
		// The epoch began when its first reader started to wait.
		r.epochStart.CompareAndSwap(0, time.Now().Add(-blocked).UnixNano())
	}
	sh.reads[src].Add(1)
	sh.bytes[src].Add(uint64(n))
	if blocked > 0 {
		ns := uint64(blocked)
		sh.stallNs.Add(ns)
		sh.hist[bucketOf(ns)].Add(1)
		for m := sh.maxNs.Load(); ns > m && !sh.maxNs.CompareAndSwap(m, ns); m = sh.maxNs.Load() {
		}
		r.addBusy(src, n, int64(blocked))
	}
	if e == nil {
		return
	}
	e.reads.Add(1)
	e.bytes.Add(uint64(n))
	if blocked > 0 {
		e.stallNs.Add(uint64(blocked))
	}
	r.noteSource(e, src)
	r.finishEpoch(g, st)
}

// Prefetched records n bytes of file fetched from the backend by the
// prefetcher, ahead of any reader (not a stall).
func (r *Recorder) Prefetched(file uint32, n int64) {
	if r == nil {
		return
	}
	sh := &r.shards[shardOf(file)]
	sh.prefetchFetches.Add(1)
	sh.prefetchBytes.Add(uint64(max(n, 0)))
	if int(file) < len(r.files) {
		r.noteFetch(&r.files[file])
	}
}

// PrefetchHit records a read of n bytes of file served from an item the
// prefetcher brought in: a miss that the reader did not wait for. The read
// itself is also recorded with Read, with the tier that served it.
func (r *Recorder) PrefetchHit(file uint32, n int64) {
	if r == nil {
		return
	}
	sh := &r.shards[shardOf(file)]
	sh.prefetchHits.Add(1)
	sh.prefetchHitBytes.Add(uint64(max(n, 0)))
}

// BackendRequest records one backend request, failed when err != nil, and
// whether it was a retry of an earlier failed one.
func (r *Recorder) BackendRequest(err error, retried bool) {
	if r == nil {
		return
	}
	r.requests.Add(1)
	if err != nil {
		r.errors.Add(1)
	}
	if retried {
		r.retries.Add(1)
	}
}

// SetEpoch closes the current epoch and starts epoch number epoch. After
// the first call, epochs end only by SetEpoch: a job that announces its
// epochs knows better than the detector.
func (r *Recorder) SetEpoch(epoch int) {
	if r == nil {
		return
	}
	r.explicit.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeEpochLocked("explicit", int64(epoch))
}

// addBusy merges the blocked interval that ends now into the unions.
func (r *Recorder) addBusy(src Source, n, blocked int64) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	now := time.Now().UnixNano()
	b := &r.busy
	b.allNs += union(&b.allUntil, now, blocked)
	if src == Backend {
		b.backendNs += union(&b.backendUntil, now, blocked)
		b.backendBytes += n
		b.backendReads++
	}
}

// union extends a union of intervals that ends at *until by [now-d, now],
// with now >= *until, and returns the time it adds.
func union(until *int64, now, d int64) int64 {
	start := now - d
	var add int64
	switch {
	case start >= *until:
		add = d
	case now > *until:
		add = now - *until
	}
	*until = max(*until, now)
	return add
}

// noteSource records src in the file's seen-sources set and as its last
// source; it writes only when something changes.
func (r *Recorder) noteSource(e *fileEntry, src Source) {
	for {
		old := e.meta.Load()
		nw := old&^metaLastMask | uint32(1)<<src | uint32(src)<<metaLastShift
		if src == Backend && old>>metaEpochShift == 0 {
			nw |= r.epochTag24() << metaEpochShift
		}
		if nw == old || e.meta.CompareAndSwap(old, nw) {
			return
		}
	}
}

// noteFetch records the epoch of a file's first backend fetch.
func (r *Recorder) noteFetch(e *fileEntry) {
	for {
		old := e.meta.Load()
		if old>>metaEpochShift != 0 {
			return
		}
		if e.meta.CompareAndSwap(old, old|r.epochTag24()<<metaEpochShift) {
			return
		}
	}
}

// epochTag24 is the current displayed epoch number + 1 in 24 bits (0 means
// never fetched).
func (r *Recorder) epochTag24() uint32 {
	n := r.epochNum.Load() + 1
	return uint32(min(max(n, 1), metaEpochMax))
}

// secs converts nanoseconds to seconds.
func secs(ns int64) float64 { return float64(ns) / 1e9 }

// ratio is a/b, 0 when b is 0, never NaN or Inf.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a/b) || math.IsInf(a/b, 0) {
		return 0
	}
	return a / b
}
