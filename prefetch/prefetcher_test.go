package prefetch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeStore is a cache in front of a slow backend: a fetch takes latency
// (virtual time under synctest), and a reader that asks for an item being
// fetched waits on that fetch, as the real read path does.
type fakeStore struct {
	latency time.Duration
	size    int64 // reported by Size when > 0

	mu      sync.Mutex
	state   map[string]chan struct{} // closed when cached
	warms   int
	fetches int
}

func newFakeStore(latency time.Duration) *fakeStore {
	return &fakeStore{latency: latency, state: make(map[string]chan struct{})}
}

func (f *fakeStore) Warm(ctx context.Context, path string) (bool, error) {
	f.mu.Lock()
	f.warms++
	if ch, ok := f.state[path]; ok {
		f.mu.Unlock()
		select {
		case <-ch:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	ch := make(chan struct{})
	f.state[path] = ch
	f.fetches++
	f.mu.Unlock()
	t := time.NewTimer(f.latency)
	defer t.Stop()
	select {
	case <-t.C:
		close(ch)
		return true, nil
	case <-ctx.Done():
		f.mu.Lock()
		delete(f.state, path)
		f.mu.Unlock()
		close(ch) // waiters retry
		return false, ctx.Err()
	}
}

func (f *fakeStore) warmCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.warms
}

// read returns whether the reader had to wait for the backend.
func (f *fakeStore) read(path string) bool {
	for {
		f.mu.Lock()
		ch, ok := f.state[path]
		if !ok {
			ch = make(chan struct{})
			f.state[path] = ch
			f.mu.Unlock()
			time.Sleep(f.latency)
			close(ch)
			return true
		}
		f.mu.Unlock()
		select {
		case <-ch:
			return false
		default:
		}
		<-ch
		f.mu.Lock()
		_, still := f.state[path]
		f.mu.Unlock()
		if still {
			return true
		}
	}
}

func (f *fakeStore) preload(paths ...string) {
	for _, p := range paths {
		ch := make(chan struct{})
		close(ch)
		f.state[p] = ch
	}
}

// sizedStore adds Sizer to fakeStore.
type sizedStore struct{ *fakeStore }

func (s sizedStore) Size(string) (int64, bool) { return s.size, true }

func testLayout(t *testing.T, n int) *Layout {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("train/c%03d/img%06d.jpg", i%17, i)
	}
	l, err := NewLayout(paths)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func epochPaths(t *testing.T, l *Layout, o Order, e int) []string {
	t.Helper()
	idx, err := o.Epoch(e)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = l.Path(x)
	}
	return out
}

// readAll reads paths one every gap and returns the positions where the
// reader waited; check runs after each read.
func readAll(p *Prefetcher, f *fakeStore, paths []string, gap time.Duration, check func(i int)) []int {
	var stalls []int
	for i, s := range paths {
		p.Observe(s)
		if f.read(s) {
			stalls = append(stalls, i)
		}
		if check != nil {
			check(i)
		}
		time.Sleep(gap)
	}
	return stalls
}

// startPrefetcher runs p until the test's end and checks that Run returns
// after Close.
func startPrefetcher(t *testing.T, p *Prefetcher) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	})
}

func TestPrefetchInOrderHidesEveryMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		l := testLayout(t, n)
		o, err := NewTorchRandom(n, 7, SamplerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f := newFakeStore(20 * time.Millisecond)
		paths := epochPaths(t, l, o, 0)
		// A third of the dataset is cached already.
		for i := 0; i < n; i += 3 {
			f.preload(l.Path(i))
		}
		const ahead = 64
		p := New(l, o, f, Options{Ahead: ahead, Concurrency: 8, Window: 32})
		startPrefetcher(t, p)
		synctest.Wait() // the prefetcher has issued its first Warm calls
		stalls := readAll(p, f, paths, 5*time.Millisecond, func(int) {
			if s := reader0(p); s.Lead > ahead {
				t.Fatalf("lead %d > Ahead %d", s.Lead, ahead)
			}
		})
		// Only the first items, issued at the same moment the reader
		// started, may still be in flight when read.
		for _, i := range stalls {
			if i >= 8 {
				t.Errorf("reader waited at position %d: miss not hidden (stalls %v)", i, stalls)
				break
			}
		}
		synctest.Wait()
		s := reader0(p)
		e0 := s.Epochs[0]
		if e0.Matched != n || e0.Observed != n || e0.Unmatched != 0 {
			t.Errorf("epoch 0: observed %d matched %d unmatched %d, want %d/%d/0", e0.Observed, e0.Matched, e0.Unmatched, n, n)
		}
		if e0.Hidden < int64(2*n/3-8) || e0.Late > 8 {
			t.Errorf("epoch 0: hidden %d late %d; want about %d hidden", e0.Hidden, e0.Late, 2*n/3)
		}
		if e0.Cached < int64(n/3-8) {
			t.Errorf("epoch 0: cached %d, want about %d", e0.Cached, n/3)
		}
		if e0.MaxLead != ahead {
			t.Errorf("max lead %d, want %d", e0.MaxLead, ahead)
		}
		if s.Disabled {
			t.Errorf("disabled: %s", s.DisabledReason)
		}
	})
}

// loaderOrder reorders paths the way a DataLoader with workers does:
// batches of size b, nw workers each reading its own batch, so reads come
// from up to inflight batches at once.
func loaderOrder(paths []string, b, inflight int, r *rand.Rand) []string {
	var out []string
	for start := 0; start < len(paths); start += b * inflight {
		end := min(start+b*inflight, len(paths))
		chunk := append([]string(nil), paths[start:end]...)
		r.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
		out = append(out, chunk...)
	}
	return out
}

func TestPrefetchReorderedReadsAndEpochBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, epochs = 2000, 3
		l := testLayout(t, n)
		o, err := NewTorchDistributed(n, DistributedOptions{Seed: 3, WorldSize: 2, Rank: 1, DropLast: true})
		if err != nil {
			t.Fatal(err)
		}
		f := newFakeStore(10 * time.Millisecond)
		// Displacement up to 4 workers * pf 2 * batch 8 = 64 positions;
		// the loader's first burst of an epoch spans as many, so the next
		// epoch is fetched a Window ahead (the default, Concurrency,
		// leaves its first read waiting).
		p := New(l, o, f, Options{Ahead: 128, Concurrency: 16, Window: 64, CheckReads: 64, NextEpochAhead: 64})
		startPrefetcher(t, p)
		synctest.Wait()
		r := rand.New(rand.NewPCG(1, 2))
		var allStalls [][]int
		for e := range epochs {
			paths := loaderOrder(epochPaths(t, l, o, e), 8, 8, r)
			// DataLoader drop_last never reads the last partial batch.
			paths = paths[:len(paths)-3]
			allStalls = append(allStalls, readAll(p, f, paths, 2*time.Millisecond, nil))
		}
		synctest.Wait()
		s := reader0(p)
		if s.Disabled {
			t.Fatalf("disabled: %s", s.DisabledReason)
		}
		if s.Epoch != epochs-1 {
			t.Errorf("tracker in epoch %d, want %d", s.Epoch, epochs-1)
		}
		// The prefetcher has already issued the head of the next epoch.
		if len(s.Epochs) != epochs+1 || s.Epochs[epochs].Issued == 0 {
			t.Errorf("epochs in stats: %+v; want %d read and 1 prefetched", s.Epochs, epochs)
		}
		for e, st := range s.Epochs[:min(epochs, len(s.Epochs))] {
			// The unread last partial batch is skipped once the reader moves on.
			wantSkipped := int64(3)
			if e == epochs-1 {
				wantSkipped = 0
			}
			if st.Epoch != e || st.Observed != n/2-3 || st.Matched != st.Observed || st.Skipped != wantSkipped {
				t.Errorf("epoch %d: %+v; want every one of %d reads matched, %d skipped", e, st, n/2-3, wantSkipped)
			}
			if e > 0 && len(allStalls[e]) > 0 {
				t.Errorf("epoch %d: reader waited at %v; the next epoch's head should be prefetched", e, allStalls[e])
			}
		}
	})
}

func TestPrefetchWrongSeedStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		l := testLayout(t, n)
		predicted, _ := NewTorchRandom(n, 1, SamplerOptions{})
		actual, _ := NewTorchRandom(n, 2, SamplerOptions{})
		f := newFakeStore(time.Millisecond)
		p := New(l, predicted, f, Options{Ahead: 32, Concurrency: 4, Window: 64})
		startPrefetcher(t, p)
		paths := epochPaths(t, l, actual, 0)
		disabledAt := -1
		readAll(p, f, paths[:300], time.Millisecond, func(i int) {
			synctest.Wait()
			if disabledAt < 0 && reader0(p).Disabled {
				disabledAt = i
			}
		})
		if disabledAt < 0 {
			t.Fatalf("wrong seed not detected after 300 reads: %+v", reader0(p))
		}
		if disabledAt > 256 {
			t.Errorf("detected after %d reads, want <= 256", disabledAt+1)
		}
		synctest.Wait()
		before := f.warmCount()
		readAll(p, f, paths[300:800], time.Millisecond, nil)
		synctest.Wait()
		if after := f.warmCount(); after != before {
			t.Errorf("%d Warm calls after prefetching stopped", after-before)
		}
		s := reader0(p)
		if s.DisabledReason == "" || s.Epochs[0].MatchRate > 0.5 {
			t.Errorf("stats after detection: %+v", s)
		}
		// The right order re-enables it.
		p.SetOrder(actual)
		synctest.Wait()
		if s := reader0(p); s.Disabled {
			t.Errorf("still disabled after SetOrder: %s", s.DisabledReason)
		}
		if f.warmCount() == before {
			t.Errorf("no Warm calls after SetOrder")
		}
	})
}

func TestPrefetchBoundedQueueAndBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		l := testLayout(t, n)
		f := newFakeStore(5 * time.Millisecond)
		f.size = 1000
		p := New(l, NewSequential(n), sizedStore{f}, Options{Ahead: 500, AheadBytes: 10_000, Concurrency: 32, QueueSize: 16})
		// Without Run nothing drains the queue: Observe must not block.
		for i := range 100 {
			p.Observe(l.Path(i))
		}
		if s := p.Stats(); s.Dropped != 100-16 {
			t.Errorf("dropped %d, want %d", s.Dropped, 100-16)
		}
		p.Close() // before Run: Run must return at once
		if err := p.Run(t.Context()); err != nil {
			t.Errorf("Run after Close: %v", err)
		}

		p = New(l, NewSequential(n), sizedStore{f}, Options{Ahead: 500, AheadBytes: 10_000, Concurrency: 32})
		startPrefetcher(t, p)
		synctest.Wait()
		readAll(p, f, epochPaths(t, l, p.Order(), 0), time.Millisecond, func(int) {
			synctest.Wait()
			if s := reader0(p); s.LeadBytes > 10_000 || s.Lead > 11 || s.InFlight > 10 {
				t.Fatalf("lead %d items %d bytes, %d in flight: byte bound not kept", s.Lead, s.LeadBytes, s.InFlight)
			}
		})
	})
}

func TestPrefetchCloseStopsWarms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := testLayout(t, 100)
		f := newFakeStore(time.Hour)
		p := New(l, NewSequential(100), f, Options{Concurrency: 4})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		synctest.Wait()
		if s := reader0(p); s.InFlight != 4 {
			t.Fatalf("in flight %d, want 4", s.InFlight)
		}
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
		p.Close()
		p.Close()
		// synctest fails the test if any goroutine (a worker, a Warm) is
		// still blocked here.
	})
}

func TestPrefetchRepeatedEpochAndPushList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 600
		l := testLayout(t, n)
		o, _ := NewTorchDistributed(n, DistributedOptions{Seed: 9, WorldSize: 1})
		f := newFakeStore(time.Millisecond)
		p := New(l, o, f, Options{Ahead: 16, Concurrency: 4, Window: 16})
		startPrefetcher(t, p)
		// A job without set_epoch reads epoch 0's order twice.
		e0 := epochPaths(t, l, o, 0)
		readAll(p, f, e0, time.Millisecond, nil)
		readAll(p, f, e0, time.Millisecond, nil)
		synctest.Wait()
		s := reader0(p)
		if s.RepeatsEpoch == nil || *s.RepeatsEpoch != 0 || s.Epoch != 1 {
			t.Fatalf("repeat not followed: %+v", s)
		}
		if st := s.Epochs[1]; st.Matched != n {
			t.Errorf("second pass: matched %d of %d", st.Matched, n)
		}

		// An explicit list for epoch 2.
		list := append([]string(nil), e0...)
		rand.New(rand.NewPCG(3, 4)).Shuffle(n, func(i, j int) { list[i], list[j] = list[j], list[i] })
		if err := p.PushList(2, list); err != nil {
			t.Fatal(err)
		}
		if err := p.PushList(3, []string{"not/in/layout"}); err == nil {
			t.Error("PushList with an unknown path: no error")
		}
		synctest.Wait()
		stalls := readAll(p, f, list, 2*time.Millisecond, nil)
		synctest.Wait()
		s = reader0(p)
		last := s.Epochs[len(s.Epochs)-1]
		if last.Epoch != 2 || last.Matched != n || len(stalls) > 0 {
			t.Errorf("pushed list: epoch %d matched %d of %d, stalls %v", last.Epoch, last.Matched, n, stalls)
		}
	})
}

// reader0 is the stats of a single-reader prefetcher.
func reader0(p *Prefetcher) ReaderStats { return p.Stats().Readers[0] }

func TestPrefetchSeveralRanksOneMount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, world, epochs = 4000, 4, 2
		l := testLayout(t, n)
		var readers []Reader
		for r := range world {
			o, err := NewTorchDistributed(n, DistributedOptions{Seed: 1, WorldSize: world, Rank: r})
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, Reader{Name: fmt.Sprintf("rank %d", r), Order: o})
		}
		f := newFakeStore(10 * time.Millisecond)
		p := NewReaders(l, readers, f, Options{Ahead: 32, Concurrency: 32, Window: 16})
		startPrefetcher(t, p)
		synctest.Wait()
		// The ranks read concurrently at different speeds.
		var wg sync.WaitGroup
		stalls := make([]int, world)
		for r, rd := range readers {
			wg.Go(func() {
				for e := range epochs {
					paths := epochPaths(t, l, rd.Order, e)
					s := readAll(p, f, paths, time.Duration(r+2)*time.Millisecond, nil)
					if e > 0 || len(s) > 0 && s[len(s)-1] >= 16 {
						stalls[r] += len(s)
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		s := p.Stats()
		for r, rs := range s.Readers {
			if rs.Disabled || rs.Epoch != epochs-1 {
				t.Errorf("%s: disabled %v (%s), epoch %d", rs.Name, rs.Disabled, rs.DisabledReason, rs.Epoch)
			}
			for _, st := range rs.Epochs[:epochs] {
				// A file that two ranks in different epochs both expect
				// next may be credited to the other one, rarely.
				if st.Observed < n/world-2 || st.Observed > n/world+2 || st.Matched < st.Observed-2 {
					t.Errorf("%s epoch %d: observed %d matched %d, want %d", rs.Name, st.Epoch, st.Observed, st.Matched, n/world)
				}
			}
			if stalls[r] > 0 {
				t.Errorf("%s: %d reads waited after the start", rs.Name, stalls[r])
			}
		}
	})
}

// TestPrefetchStallSimulation measures, in virtual time, the fetch stall
// of one epoch read at a fixed rate below what the backend delivers (20 ms
// first byte, 100 MB/s, 110 kB items, 16 concurrent fetches), with a
// no-eviction cache holding a fraction f of the items, with and without
// prefetch.
func TestPrefetchStallSimulation(t *testing.T) {
	const (
		n       = 3000
		item    = 110_000
		gap     = 2 * time.Millisecond // reader: 500 items/s, 55 MB/s
		latency = 20*time.Millisecond + item*time.Second/100_000_000
	)
	for _, frac := range []float64{0.25, 0.5} {
		var stall [2]time.Duration
		for i, prefetch := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				l := testLayout(t, n)
				o, _ := NewTorchDistributed(n, DistributedOptions{Seed: 0})
				f := newFakeStore(latency)
				// The cache admitted the first items of the first epoch.
				first, _ := o.Epoch(0)
				for _, x := range first[:int(frac*n)] {
					f.preload(l.Path(x))
				}
				var p *Prefetcher
				if prefetch {
					p = New(l, o, f, Options{Ahead: 64, Concurrency: 16, StartEpoch: 1})
					startPrefetcher(t, p)
					synctest.Wait()
				}
				for _, s := range epochPaths(t, l, o, 1) {
					if p != nil {
						p.Observe(s)
					}
					start := time.Now()
					f.read(s)
					stall[i] += time.Since(start)
					time.Sleep(gap)
				}
			})
		}
		ratio := float64(stall[1]) / float64(stall[0])
		t.Logf("cache %.0f%%: fetch stall per epoch %v without prefetch, %v with (%.2f%%)", 100*frac, stall[0], stall[1], 100*ratio)
		if stall[0] == 0 || ratio > 0.05 {
			t.Errorf("cache %.0f%%: stall with prefetch %v is %.1f%% of %v without; want <= 5%%", 100*frac, stall[1], 100*ratio, stall[0])
		}
	}
}

// TestPrefetchNextEpochBound: with a lead longer than an epoch, the
// prefetcher issues the reader's epoch and only NextEpochAhead positions
// of the next one until the reader gets there (a job may stop after any
// epoch; what it fetched for the next one is that epoch's backend
// traffic), then the full lead resumes in the new epoch.
func TestPrefetchNextEpochBound(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		name      string
		next      int
		wantNext  int // issued positions of epoch 1 while the reader is in epoch 0
		wantLater int // issued positions of epoch 2 once the reader is in epoch 1
	}{
		{"default is Concurrency", 0, 4, 4},
		{"explicit", 10, 10, 10},
		{"unbounded", -1, n, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := testLayout(t, n)
				o, err := NewTorchDistributed(n, DistributedOptions{Seed: 4})
				if err != nil {
					t.Fatal(err)
				}
				f := newFakeStore(time.Millisecond)
				p := New(l, o, f, Options{Ahead: 3 * n, Concurrency: 4, Window: 8, NextEpochAhead: tc.next})
				startPrefetcher(t, p)
				time.Sleep(time.Second) // every Warm call it may make has returned
				synctest.Wait()
				issued := func(e int) int64 {
					for _, st := range reader0(p).Epochs {
						if st.Epoch == e {
							return st.Issued
						}
					}
					return 0
				}
				if got := issued(0); got != n {
					t.Errorf("epoch 0: issued %d, want %d", got, n)
				}
				if got := issued(1); got != int64(tc.wantNext) {
					t.Errorf("reader in epoch 0: issued %d of epoch 1, want %d", got, tc.wantNext)
				}
				if tc.next >= 0 {
					if got := f.warmCount(); got != n+tc.wantNext {
						t.Errorf("%d Warm calls, want %d", got, n+tc.wantNext)
					}
				}
				// The reader reads epoch 0 and starts epoch 1: the rest of
				// epoch 1 is issued, and again only the head of epoch 2.
				e0 := epochPaths(t, l, o, 0)
				stalls := readAll(p, f, e0, time.Millisecond, nil)
				e1 := epochPaths(t, l, o, 1)
				p.Observe(e1[0])
				time.Sleep(time.Second)
				synctest.Wait()
				if len(stalls) > 0 {
					t.Errorf("epoch 0: reader waited at %v", stalls)
				}
				if s := reader0(p); s.Epoch != 1 {
					t.Fatalf("tracker in epoch %d, want 1", s.Epoch)
				}
				if got := issued(1); got != n {
					t.Errorf("reader in epoch 1: issued %d of epoch 1, want %d", got, n)
				}
				if got := issued(2); got != int64(tc.wantLater) {
					t.Errorf("reader in epoch 1: issued %d of epoch 2, want %d", got, tc.wantLater)
				}
			})
		})
	}
}
