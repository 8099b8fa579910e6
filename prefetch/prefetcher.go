package prefetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Warmer makes an item's data cached (or staged) ahead of the reader.
type Warmer interface {
	// Warm makes the file's data cached (or staged) if it is not; it
	// returns whether a backend fetch was needed. It must be safe to call
	// concurrently, and a reader that asks for the same file meanwhile
	// must wait on the same fetch.
	Warm(ctx context.Context, path string) (fetched bool, err error)
}

// Sizer is optionally implemented by a Warmer so that Options.AheadBytes
// can bound the bytes issued ahead of the reader.
type Sizer interface {
	// Size returns the size of the file at path, if known.
	Size(path string) (int64, bool)
}

// Options configures a Prefetcher. The zero value works.
type Options struct {
	// Ahead is the most items issued ahead of the reader (0: 512).
	Ahead int
	// AheadBytes bounds the bytes issued ahead and not yet read, when the
	// Warmer is a Sizer (0: 512 MiB; < 0: no bound).
	AheadBytes int64
	// Concurrency is the most Warm calls at once (0: 16).
	Concurrency int
	// NextEpochAhead is the most positions of a later epoch issued while
	// the reader is still in its current one (0: Concurrency; < 0: only
	// Ahead and AheadBytes bound it). A job may end after any epoch, and
	// what is fetched for the next one before the reader gets there is
	// backend traffic of the current one; this bound keeps that to one
	// round of fetches, enough for the next epoch's first reads, and the
	// full lead resumes as soon as the reader enters the epoch. Set it
	// to Window to have the loader's whole first burst of the next epoch
	// fetched ahead.
	NextEpochAhead int
	// Window is how far (in items) reads may run ahead of the lowest
	// unread predicted item and still match: a DataLoader with W workers,
	// prefetch_factor pf and batch size B needs pf*W*B (0: 1024).
	Window int
	// QueueSize is how many observations may wait; more are dropped and
	// counted (0: 8192).
	QueueSize int
	// CheckReads and MinMatchRate detect a wrong prediction: once at least
	// CheckReads reads were observed, prefetching stops when fewer than
	// MinMatchRate of the last CheckReads matched (0: 256 and 0.5).
	CheckReads   int
	MinMatchRate float64
	// KeepEpochs is how many epochs Stats reports (0: 64).
	KeepEpochs int
	// StartEpoch is the epoch the reader starts in.
	StartEpoch int
	// Logger receives the prefetcher's few logs (nil: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Ahead, 512)
	def(&o.Concurrency, 16)
	if o.NextEpochAhead == 0 {
		o.NextEpochAhead = o.Concurrency
	}
	def(&o.Window, 1024)
	def(&o.QueueSize, 8192)
	def(&o.CheckReads, 256)
	def(&o.KeepEpochs, 64)
	if o.AheadBytes == 0 {
		o.AheadBytes = 512 << 20
	}
	if o.MinMatchRate <= 0 {
		o.MinMatchRate = 0.5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Prefetcher follows a reader through a predicted order and warms the
// items ahead of it. See the package documentation for its invariants.
type Prefetcher struct {
	// immutable after New
	layout *Layout
	w      Warmer
	sizer  Sizer
	opts   Options
	log    *slog.Logger

	obs     chan string
	wake    chan struct{}
	closeCh chan struct{}
	done    chan struct{}

	closeOnce sync.Once
	running   atomic.Bool
	dropped   atomic.Int64

	mu sync.Mutex
	// guarded by mu
	tracks   []*track
	inflight int
}

// issued is a Warm call for one predicted position.
type issued struct {
	size                    int64
	done, fetched, observed bool
}

type job struct {
	track      *track
	gen, epoch int
	g          int64
	path       string
}

type result struct {
	job
	fetched bool
	err     error
}

// Reader is one reader the prefetcher follows: a rank's sampler, when
// several ranks read through one mount.
type Reader struct {
	// Name labels the reader in stats and logs (e.g. "rank 3").
	Name  string
	Order Order
}

// New returns a prefetcher that predicts reads of layout in order and
// warms them with w. Call Run to start it.
func New(layout *Layout, order Order, w Warmer, opts Options) *Prefetcher {
	return NewReaders(layout, []Reader{{Order: order}}, w, opts)
}

// NewReaders is New for several readers sharing the mount (the ranks of
// one node): each read is matched against every reader's prediction,
// and each reader gets Ahead items ahead of it within one Concurrency.
func NewReaders(layout *Layout, readers []Reader, w Warmer, opts Options) *Prefetcher {
	opts = opts.withDefaults()
	p := &Prefetcher{
		layout:  layout,
		w:       w,
		opts:    opts,
		log:     opts.Logger,
		obs:     make(chan string, opts.QueueSize),
		wake:    make(chan struct{}, 1),
		closeCh: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.sizer, _ = w.(Sizer)
	p.mu.Lock()
	p.setReadersLocked(readers, opts.StartEpoch)
	for _, t := range p.tracks {
		t.searching = false // a fresh job starts at the head of its first epoch
	}
	p.mu.Unlock()
	return p
}

func (p *Prefetcher) setReadersLocked(readers []Reader, e int) {
	p.tracks = p.tracks[:0]
	for _, r := range readers {
		t := newTrack(p, r.Name)
		t.setOrder(r.Order, e)
		p.tracks = append(p.tracks, t)
	}
}

// Observe tells the prefetcher that the reader opened path (relative to
// the mount root, as in the Layout; a leading slash is ignored). Call it
// once per open. It never blocks: when the queue is full the
// observation is dropped and counted.
func (p *Prefetcher) Observe(path string) {
	select {
	case p.obs <- path:
	default:
		p.dropped.Add(1)
	}
}

// SetOrder replaces the predicted order (and every reader by one); the
// reader is looked for from the start of epoch 0 (see SetOrderAt).
func (p *Prefetcher) SetOrder(o Order) { p.SetOrderAt(o, 0) }

// SetOrderAt replaces the predicted order (and every reader by one) and
// expects the reader in epoch e, anywhere: the first read that matches
// epoch e's order sets the position. It re-enables a disabled prefetcher.
func (p *Prefetcher) SetOrderAt(o Order, e int) { p.SetReaders([]Reader{{Order: o}}, e) }

// SetReaders replaces the readers, each expected in epoch e, as
// SetOrderAt does for one.
func (p *Prefetcher) SetReaders(readers []Reader, e int) {
	p.mu.Lock()
	p.setReadersLocked(readers, e)
	p.mu.Unlock()
	p.poke()
}

// PushList sets the order of epoch e explicitly (paths relative to the
// mount root). If the prefetcher does not follow exactly one List order,
// it now does, and the reader is expected in epoch e; so it is when
// prefetching was disabled or was waiting for another epoch's order.
func (p *Prefetcher) PushList(e int, paths []string) error {
	idx := make([]int, len(paths))
	for i, s := range paths {
		j, ok := p.layout.Index(strings.TrimPrefix(s, "/"))
		if !ok {
			return fmt.Errorf("push order of epoch %d: %q is not in the layout", e, s)
		}
		idx[i] = j
	}
	p.mu.Lock()
	var l *List
	restart := true
	if len(p.tracks) == 1 {
		t := p.tracks[0]
		l, _ = t.order.(*List)
		restart = t.disabled != "" || t.curErr != nil && t.cur.epoch != e
	}
	p.mu.Unlock()
	if l == nil {
		l = NewList(p.layout.Len(), false)
		restart = true
	}
	if err := l.Push(e, idx); err != nil {
		return err
	}
	if restart {
		p.SetOrderAt(l, e)
		return nil
	}
	p.mu.Lock()
	p.tracks[0].retryOrders()
	p.mu.Unlock()
	p.poke()
	return nil
}

func (p *Prefetcher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops Run and waits for it and every Warm call it started to
// return. It is safe to call more than once, and before or without Run.
func (p *Prefetcher) Close() {
	p.closeOnce.Do(func() { close(p.closeCh) })
	if p.running.Load() {
		<-p.done
	}
}

// Run prefetches until ctx is done or Close is called. It returns nil
// after Close, ctx's error otherwise. Run may be called once.
func (p *Prefetcher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("prefetch: Run called twice")
	}
	defer close(p.done)
	ctx, cancel := context.WithCancel(ctx)
	// Both channels hold Concurrency items, and at most Concurrency jobs
	// are outstanding, so neither side ever blocks on a send.
	jobs := make(chan job, p.opts.Concurrency)
	results := make(chan result, p.opts.Concurrency)
	var wg sync.WaitGroup
	for range p.opts.Concurrency {
		wg.Go(func() {
			for j := range jobs {
				f, err := p.w.Warm(ctx, j.path)
				results <- result{j, f, err}
			}
		})
	}
	defer func() {
		close(jobs)
		cancel()
		wg.Wait()
	}()
	var send []job
	for {
		p.mu.Lock()
		send = p.issueLocked(send[:0])
		p.mu.Unlock()
		for _, j := range send {
			jobs <- j
		}
		select {
		case <-p.closeCh:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case s := <-p.obs:
			p.mu.Lock()
			p.observeLocked(s)
			for range 255 { // take a batch while holding the lock
				select {
				case s = <-p.obs:
					p.observeLocked(s)
					continue
				default:
				}
				break
			}
			p.mu.Unlock()
		case r := <-results:
			p.mu.Lock()
			p.inflight--
			r.track.complete(r) // a replaced track just counts into its orphaned stats
			p.mu.Unlock()
		case <-p.wake:
			p.mu.Lock()
			for _, t := range p.tracks {
				t.retryOrders()
			}
			p.mu.Unlock()
		}
	}
}

// Stats returns a snapshot of the counters.
func (p *Prefetcher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{InFlight: p.inflight, Dropped: p.dropped.Load()}
	for _, t := range p.tracks {
		s.Readers = append(s.Readers, t.snapshot())
	}
	return s
}

func (t *track) snapshot() ReaderStats {
	s := ReaderStats{
		Name:           t.name,
		Epoch:          t.cur.epoch,
		Position:       t.cur.pos,
		EpochLen:       len(t.cur.order),
		Lead:           t.lead(),
		LeadBytes:      t.leadBytes,
		InFlight:       t.inflight,
		Disabled:       t.disabled != "",
		DisabledReason: t.disabled,
	}
	switch {
	case t.curErr != nil:
		s.Waiting = t.curErr.Error()
	case t.issueErr != nil:
		s.Waiting = t.issueErr.Error()
	}
	if t.frozen >= 0 {
		f := t.frozen
		s.RepeatsEpoch = &f
	}
	for _, st := range t.stats {
		c := *st
		c.rates()
		s.Epochs = append(s.Epochs, c)
	}
	slices.SortFunc(s.Epochs, func(a, b EpochStats) int { return a.Epoch - b.Epoch })
	return s
}
