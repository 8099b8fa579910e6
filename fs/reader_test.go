package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

func testReader(t *testing.T, b backend.Backend, o readerOptions) *reader {
	t.Helper()
	if o.chunk == 0 {
		o.chunk = 4 << 20
	}
	if o.maxFills == 0 {
		o.maxFills = 64
	}
	if o.backoff == 0 {
		o.backoff = 10 * time.Millisecond
	}
	if o.buffer == 0 {
		o.buffer = 64 << 20
	}
	o.log = slog.New(slog.DiscardHandler)
	life, cancel := context.WithCancel(context.Background())
	r := newReader(life, b, o)
	t.Cleanup(func() { cancel(); r.close() })
	return r
}

func refOf(b *fakeBackend, p string) *fileRef {
	size := b.files[p]
	return &fileRef{id: 7, path: p, version: itoa(size), size: size}
}

func itoa(n int64) string { return fmtInt(n) }

func TestReadDedupSharedFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBackend(map[string]int64{"a/img.jpg": 110_000})
		b.gate = make(chan struct{})
		rec := &recorder{}
		// A 1-byte buffer keeps nothing, so only the flight can share.
		r := testReader(t, b, readerOptions{buffer: 1, recorder: rec})
		f := refOf(b, "a/img.jpg")
		const readers = 64
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for i := range readers {
			wg.Go(func() {
				off := int64(i * 1000)
				buf := make([]byte, 4096)
				n, err := r.read(t.Context(), f, nil, buf, off)
				if err == nil && n != len(buf) {
					err = errors.New("short read")
				}
				if err == nil {
					for j, c := range buf {
						if c != patByte(seedOf(f.path), off+int64(j)) {
							err = errors.New("wrong byte")
							break
						}
					}
				}
				errs <- err
			})
		}
		synctest.Wait() // all 64 readers wait on one flight
		if got := b.reads.Load(); got != 1 {
			t.Fatalf("backend reads while %d readers wait = %d, want 1", readers, got)
		}
		close(b.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := b.reads.Load(); got != 1 {
			t.Errorf("backend reads = %d, want 1", got)
		}
		// The item crossed the backend once: its 110,000 bytes are the
		// backend's, the readers' other bytes are hits of the shared fill.
		if got := rec.bytes[stats.Backend]; got != 110_000 {
			t.Errorf("recorded %d bytes from backend, want the item's 110000", got)
		}
		if got := rec.bytes[stats.Backend] + rec.bytes[stats.Memory]; got != readers*4096 {
			t.Errorf("recorded %d bytes in all, want the %d read", got, readers*4096)
		}
	})
}

func TestReadCancelledReaderOthersSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBackend(map[string]int64{"f": 5000})
		b.gate = make(chan struct{})
		r := testReader(t, b, readerOptions{})
		f := refOf(b, "f")
		ctx, cancel := context.WithCancel(t.Context())
		cancelled := make(chan error, 1)
		go func() {
			_, err := r.read(ctx, f, nil, make([]byte, 100), 0)
			cancelled <- err
		}()
		others := make(chan error, 2)
		for range 2 {
			go func() {
				buf := make([]byte, 5000)
				n, err := r.read(t.Context(), f, nil, buf, 0)
				if err == nil && n == 5000 {
					checkPat(t, "other reader", buf, seedOf("f"), 0)
				}
				others <- err
			}()
		}
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case err := <-cancelled:
			if got := toErrno(err); got != syscall.EINTR {
				t.Fatalf("cancelled reader: errno %v (%v), want EINTR", got, err)
			}
		default:
			t.Fatal("cancelled reader did not return while the fill was blocked")
		}
		close(b.gate)
		for range 2 {
			if err := <-others; err != nil {
				t.Fatalf("other reader: %v", err)
			}
		}
		if got := b.reads.Load(); got != 1 {
			t.Errorf("backend reads = %d, want 1", got)
		}
	})
}

func TestReadErrors(t *testing.T) {
	cases := []struct {
		name      string
		setup     func(b *fakeBackend)
		path      string
		wantErrno syscall.Errno
		wantReads int64
	}{
		{"transient error retried then EIO", func(b *fakeBackend) {
			b.fail = func(string, int64) error { return errBoom }
		}, "f", syscall.EIO, 4},
		{"throttled retried then EIO", func(b *fakeBackend) {
			b.fail = func(string, int64) error { return backend.ErrThrottled }
		}, "f", syscall.EIO, 4},
		{"stale not retried", func(b *fakeBackend) {
			b.fail = func(string, int64) error { return backend.ErrStale }
		}, "f", syscall.EIO, 1},
		{"missing not retried", func(b *fakeBackend) {
			b.fail = func(p string, _ int64) error { return &iofs.PathError{Op: "read", Path: p, Err: iofs.ErrNotExist} }
		}, "f", syscall.ENOENT, 1},
		{"short read is an error", func(b *fakeBackend) { b.short = true }, "f", syscall.EIO, 1},
		{"version changed", func(b *fakeBackend) { b.files["f"]++ }, "f", syscall.EIO, 1},
		{"recovers after two failures", func(b *fakeBackend) {
			var n int
			b.fail = func(string, int64) error {
				n++
				if n <= 2 {
					return errBoom
				}
				return nil
			}
		}, "f", 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newFakeBackend(map[string]int64{"f": 3000})
				f := refOf(b, "f") // version taken before setup changes the file
				tc.setup(b)
				r := testReader(t, b, readerOptions{retries: 3})
				buf := make([]byte, 3000)
				n, err := r.read(t.Context(), f, nil, buf, 0)
				if got := toErrno(err); got != tc.wantErrno {
					t.Fatalf("errno = %v (err %v), want %v", got, err, tc.wantErrno)
				}
				if err == nil {
					if n != 3000 {
						t.Fatalf("n = %d, want 3000", n)
					}
					checkPat(t, "read", buf, seedOf("f"), 0)
				}
				if got := b.reads.Load(); got != tc.wantReads {
					t.Errorf("backend reads = %d, want %d", got, tc.wantReads)
				}
			})
		})
	}
}

func TestReadRetryBackoffIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBackend(map[string]int64{"f": 10})
		b.fail = func(string, int64) error { return errBoom }
		r := testReader(t, b, readerOptions{retries: 3, backoff: 10 * time.Millisecond})
		start := time.Now()
		_, err := r.read(t.Context(), refOf(b, "f"), nil, make([]byte, 10), 0)
		if toErrno(err) != syscall.EIO {
			t.Fatalf("err = %v, want EIO", err)
		}
		if d := time.Since(start); d != 70*time.Millisecond {
			t.Errorf("gave up after %v, want 10+20+40ms", d)
		}
	})
}

func TestReadChunksAndReadahead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const chunk = 4096
		const size = 10*chunk + 123
		b := newFakeBackend(map[string]int64{"shard.tar": size})
		r := testReader(t, b, readerOptions{chunk: chunk, readahead: 2})
		f := refOf(b, "shard.tar")
		seq := newSeqState()
		// First read: 1000 bytes of chunk 0; readahead fetches 1 and 2.
		buf := make([]byte, 1000)
		if _, err := r.read(t.Context(), f, seq, buf, 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := b.reads.Load(); got != 3 {
			t.Fatalf("backend reads after first read = %d, want 3 (chunk 0 + 2 ahead)", got)
		}
		// Read the rest sequentially in odd-sized pieces across chunks.
		all := make([]byte, size)
		copy(all, buf)
		for off := int64(1000); off < size; {
			n, err := r.read(t.Context(), f, seq, all[off:min(off+3000, size)], off)
			if err != nil {
				t.Fatal(err)
			}
			off += int64(n)
			synctest.Wait()
		}
		checkPat(t, "sequential", all, seedOf(f.path), 0)
		if got := b.reads.Load(); got != 11 {
			t.Errorf("backend reads = %d, want 11 (each chunk once)", got)
		}
		// Reads past EOF return nothing; a read across EOF is cut there.
		if n, err := r.read(t.Context(), f, seq, make([]byte, 10), size); n != 0 || err != nil {
			t.Errorf("read at EOF = %d, %v; want 0, nil", n, err)
		}
		if n, err := r.read(t.Context(), f, seq, make([]byte, 500), size-100); n != 100 || err != nil {
			t.Errorf("read across EOF = %d, %v; want 100, nil", n, err)
		}
	})
}

func TestReadRandomAccessNoReadahead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const chunk = 4096
		b := newFakeBackend(map[string]int64{"big": 20 * chunk})
		r := testReader(t, b, readerOptions{chunk: chunk, readahead: 2})
		f := refOf(b, "big")
		seq := newSeqState()
		for _, k := range []int64{7, 2, 15, 11} {
			buf := make([]byte, 100)
			if _, err := r.read(t.Context(), f, seq, buf, k*chunk+5); err != nil {
				t.Fatal(err)
			}
			checkPat(t, "random", buf, seedOf("big"), k*chunk+5)
		}
		synctest.Wait()
		// Only the first read (no history yet counts as sequential only at
		// item 0) may not trigger readahead; random jumps never do.
		if got := b.reads.Load(); got != 4 {
			t.Errorf("backend reads = %d, want 4", got)
		}
	})
}

func TestReadCacheHitsAndAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newFakeBackend(map[string]int64{"a": 1000, "b": 2000})
		c := &fakeCache{budget: 1500}
		rec := &recorder{}
		b.delay = 5 * time.Millisecond
		r := testReader(t, b, readerOptions{cache: c, recorder: rec, buffer: 1})
		for range 3 {
			for _, p := range []string{"a", "b"} {
				f := refOf(b, p)
				buf := make([]byte, f.size)
				if _, err := r.read(t.Context(), f, nil, buf, 0); err != nil {
					t.Fatal(err)
				}
				checkPat(t, p, buf, seedOf(p), 0)
			}
		}
		// a fits and is served from the cache after its fill; b never fits
		// and is fetched every time (the cache never evicts a for it).
		if got := b.reads.Load(); got != 4 {
			t.Errorf("backend reads = %d, want 4 (a once, b three times)", got)
		}
		if rec.bytes[stats.Memory] != 2000 || rec.bytes[stats.Backend] != 7000 {
			t.Errorf("bytes memory/backend = %d/%d, want 2000/7000", rec.bytes[stats.Memory], rec.bytes[stats.Backend])
		}
		if rec.blocked != 4*5*time.Millisecond {
			t.Errorf("blocked = %v, want 20ms (4 fills of 5ms, hits 0)", rec.blocked)
		}
	})
}

func TestReadAfterCloseFails(t *testing.T) {
	b := newFakeBackend(map[string]int64{"f": 10})
	life, cancel := context.WithCancel(context.Background())
	r := newReader(life, b, readerOptions{chunk: 4 << 20, maxFills: 1, buffer: 1, log: slog.New(slog.DiscardHandler)})
	cancel()
	r.close()
	if _, err := r.read(t.Context(), refOf(b, "f"), nil, make([]byte, 10), 0); toErrno(err) != syscall.EIO {
		t.Fatalf("read after close: %v, want EIO", err)
	}
}

func TestRecentItemsReadThroughAndBudget(t *testing.T) {
	c := recentItems{max: 100}
	k := func(i int64) mincache.Key { return mincache.Key{Path: "p", Chunk: i} }
	c.add(k(1), make([]byte, 40))
	c.add(k(2), make([]byte, 40))
	c.add(k(3), make([]byte, 40)) // over budget: 1 goes
	if c.has(k(1)) || !c.has(k(2)) || !c.has(k(3)) || c.used != 80 {
		t.Fatalf("after 3 adds: has1 %v has2 %v has3 %v used %d", c.has(k(1)), c.has(k(2)), c.has(k(3)), c.used)
	}
	dst := make([]byte, 30)
	if !c.copyOut(k(2), dst, 0) || !c.has(k(2)) {
		t.Fatal("partly read item dropped")
	}
	c.consume(k(2), 10)
	if c.has(k(2)) || c.used != 40 {
		t.Fatalf("read-through item kept (used %d)", c.used)
	}
	c.add(k(4), make([]byte, 101)) // larger than the budget: not kept
	if c.has(k(4)) {
		t.Fatal("oversized item kept")
	}
	for i := range int64(1000) {
		c.add(k(10+i), make([]byte, 1))
		c.consume(k(10+i), 1)
	}
	if len(c.fifo) > 2*len(c.m)+65 {
		t.Fatalf("fifo grew to %d for %d items", len(c.fifo), len(c.m))
	}
}
