package throttle

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
	"github.com/stallfs/stallfs/backend/local"
)

// fake is an in-memory backend of pattern files of fixed sizes in one
// directory, without a Walker.
type fake struct {
	sizes map[string]int64
}

func newFake() *fake {
	return &fake{sizes: map[string]int64{"a": 1 << 20, "b": 100, "d/c": 10}}
}

func (f *fake) entry(name string) (backend.Entry, bool) {
	if name == "d" {
		return backend.Entry{Name: "d", Mode: iofs.ModeDir | 0o755}, true
	}
	size, ok := f.sizes[name]
	return backend.Entry{Name: filepath.Base(name), Size: size, Version: "v"}, ok
}

func (f *fake) List(_ context.Context, dir string) ([]backend.Entry, error) {
	var names []string
	switch dir {
	case "":
		names = []string{"a", "b", "d"}
	case "d":
		names = []string{"d/c"}
	default:
		return nil, &iofs.PathError{Op: "list", Path: dir, Err: iofs.ErrNotExist}
	}
	var es []backend.Entry
	for _, n := range names {
		e, _ := f.entry(n)
		es = append(es, e)
	}
	return es, nil
}

func (f *fake) Stat(_ context.Context, path string) (backend.Entry, error) {
	e, ok := f.entry(path)
	if !ok {
		return backend.Entry{}, &iofs.PathError{Op: "stat", Path: path, Err: iofs.ErrNotExist}
	}
	return e, nil
}

func (f *fake) ReadAt(_ context.Context, path, _ string, p []byte, off int64) (int, error) {
	size, ok := f.sizes[path]
	if !ok {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: iofs.ErrNotExist}
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	backendtest.Pattern(path, off, p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *fake) String() string { return "fake://" }
func (f *fake) Close() error   { return nil }

func TestBandwidthSharedByConcurrentReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 20_000_000
		const window = 500 * time.Millisecond
		tb := New(newFake(), Options{BytesPerSec: rate})
		start := time.Now()
		var mu sync.Mutex
		perReader := make([]int64, 4)
		var wg sync.WaitGroup
		for r := range perReader {
			wg.Go(func() {
				p := make([]byte, 64<<10)
				for time.Since(start) < window {
					n, err := tb.ReadAt(t.Context(), "a", "v", p, 0)
					if err != nil {
						t.Errorf("ReadAt: %v", err)
						return
					}
					if time.Since(start) <= window {
						mu.Lock()
						perReader[r] += int64(n)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		var total int64
		for _, n := range perReader {
			total += n
		}
		got := float64(total) / window.Seconds()
		if got < 0.9*rate || got > 1.1*rate {
			t.Errorf("4 readers got %.1f MB/s together, want 20 MB/s +-10%%", got/1e6)
		}
		// Sharing is fair: every reader got about a quarter.
		for r, n := range perReader {
			if n < total/4*8/10 || n > total/4*12/10 {
				t.Errorf("reader %d got %d of %d bytes, want about a quarter", r, n, total)
			}
		}
		if c := tb.Counters(); c.ReadBytes < total {
			t.Errorf("Counters().ReadBytes = %d, want at least the %d counted in the window", c.ReadBytes, total)
		}
	})
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := New(newFake(), Options{Latency: 30 * time.Millisecond, MetaLatency: 5 * time.Millisecond, BytesPerSec: 1_000_000})
		took := func(f func()) time.Duration {
			start := time.Now()
			f()
			return time.Since(start)
		}
		// 100 bytes at 1 MB/s is 100 us, inside the idle bucket's burst.
		if d := took(func() { tb.ReadAt(t.Context(), "b", "v", make([]byte, 100), 0) }); d != 30*time.Millisecond {
			t.Errorf("small read took %v, want the 30ms latency", d)
		}
		// 1 MiB at 1 MB/s: latency + 1.048576 s - the 10 ms burst credit.
		if d, want := took(func() { tb.ReadAt(t.Context(), "a", "v", make([]byte, 1<<20), 0) }), 30*time.Millisecond+1048576*time.Microsecond-10*time.Millisecond; d != want {
			t.Errorf("1 MiB read took %v, want %v", d, want)
		}
		if d := took(func() { tb.Stat(t.Context(), "a") }); d != 5*time.Millisecond {
			t.Errorf("Stat took %v, want MetaLatency 5ms", d)
		}
		if d := took(func() { tb.List(t.Context(), "") }); d != 5*time.Millisecond {
			t.Errorf("List took %v, want MetaLatency 5ms", d)
		}
		// Latencies of concurrent readers overlap.
		d := took(func() {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() { tb.ReadAt(t.Context(), "b", "v", make([]byte, 10), 0) })
			}
			wg.Wait()
		})
		if d != 30*time.Millisecond {
			t.Errorf("8 concurrent small reads took %v, want one latency of 30ms", d)
		}
	})
}

func TestCountersExact(t *testing.T) {
	tb := New(newFake(), Options{})
	ctx := t.Context()
	p := make([]byte, 64)
	tb.ReadAt(ctx, "b", "v", p, 0)       // 64 bytes
	tb.ReadAt(ctx, "b", "v", p, 90)      // 10 bytes and io.EOF: not an error
	tb.ReadAt(ctx, "missing", "v", p, 0) // an error
	tb.Stat(ctx, "a")
	tb.Stat(ctx, "missing") // an error
	tb.List(ctx, "")
	tb.Walk(ctx, "", func(string, backend.Entry) error { return nil }) // Lists "" and "d"
	want := Counters{ReadCalls: 3, ReadBytes: 74, StatCalls: 2, ListCalls: 3, WalkCalls: 1, Errors: 2}
	if got := tb.Counters(); got != want {
		t.Errorf("Counters() = %+v, want %+v", got, want)
	}
}

func TestFaults(t *testing.T) {
	boom := errors.New("boom")
	tb := New(newFake(), Options{Fault: FailFirst(2, boom, OpRead)})
	ctx := t.Context()
	if _, err := tb.Stat(ctx, "a"); err != nil {
		t.Errorf("Stat with faults only on reads: %v", err)
	}
	p := make([]byte, 10)
	for i := range 2 {
		if n, err := tb.ReadAt(ctx, "a", "v", p, 0); n != 0 || !errors.Is(err, boom) {
			t.Errorf("read %d = %d, %v; want 0, boom", i, n, err)
		}
	}
	if n, err := tb.ReadAt(ctx, "a", "v", p, 0); n != 10 || err != nil {
		t.Errorf("third read = %d, %v; want it to succeed", n, err)
	}
	if c := tb.Counters(); c.Errors != 2 || c.ReadCalls != 3 || c.ReadBytes != 10 {
		t.Errorf("Counters() = %+v, want 2 errors, 3 reads, 10 bytes", c)
	}

	var seen []string
	tb = New(newFake(), Options{Fault: func(op, path string, off int64) error {
		seen = append(seen, op+" "+path)
		if off == 7 {
			return boom
		}
		return nil
	}})
	tb.List(ctx, "")
	tb.Stat(ctx, "b")
	if _, err := tb.ReadAt(ctx, "a", "v", p, 7); !errors.Is(err, boom) {
		t.Errorf("read at the faulted offset: %v, want boom", err)
	}
	if want := []string{"list ", "stat b", "read a"}; !slices.Equal(seen, want) {
		t.Errorf("Fault saw %q, want %q", seen, want)
	}
}

func TestShortRead(t *testing.T) {
	tb := New(newFake(), Options{ShortRead: func(_ string, _ int64, n int) int { return n / 2 }})
	p := make([]byte, 100)
	n, err := tb.ReadAt(t.Context(), "a", "v", p, 1000)
	if n != 50 || err != nil {
		t.Fatalf("ReadAt = %d, %v; want a silent short read of 50", n, err)
	}
	want := make([]byte, 50)
	backendtest.Pattern("a", 1000, want)
	if !slices.Equal(p[:50], want) {
		t.Errorf("short read returned wrong bytes")
	}
}

func TestCancelledWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, opts := range []Options{
			{Latency: time.Hour},
			{BytesPerSec: 1}, // 1 MiB would take 12 days
		} {
			tb := New(newFake(), opts)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(10*time.Millisecond, cancel)
			start := time.Now()
			n, err := tb.ReadAt(ctx, "a", "v", make([]byte, 1<<20), 0)
			if !errors.Is(err, context.Canceled) || n != 0 {
				t.Errorf("%+v: ReadAt = %d, %v; want 0, context.Canceled", opts, n, err)
			}
			if d := time.Since(start); d != 10*time.Millisecond {
				t.Errorf("%+v: cancelled read returned after %v, want 10ms", opts, d)
			}
		}
	})
}

func TestWalkWithoutWalker(t *testing.T) {
	tb := New(newFake(), Options{})
	var got []string
	err := tb.Walk(t.Context(), "", func(p string, _ backend.Entry) error {
		got = append(got, p)
		return nil
	})
	if want := []string{"a", "b", "d", "d/c"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Walk = %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	if err := tb.Walk(t.Context(), "", func(string, backend.Entry) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Walk with a failing fn = %v, want its error", err)
	}
	if c := tb.Counters(); c.Errors != 0 {
		t.Errorf("a Walk stopped by its fn counted %d backend errors", c.Errors)
	}
}

// fixture is a local directory wrapped with default Options: the wrapper
// must be transparent.
type fixture struct{ root string }

func (f fixture) Put(t testing.TB, path string, data []byte) {
	dst := filepath.Join(f.root, filepath.FromSlash(path))
	var old time.Time
	if st, err := os.Stat(dst); err == nil {
		old = st.ModTime()
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if !old.IsZero() {
		mt := old.Add(time.Second)
		if err := os.Chtimes(dst, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

func (f fixture) Backend(t testing.TB) backend.Backend {
	b, err := local.New(f.root)
	if err != nil {
		t.Fatal(err)
	}
	return New(b, Options{})
}

func TestConformanceOverLocal(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture { return fixture{root: t.TempDir()} })
}
