package azblob_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/azblob"
	"github.com/stallfs/stallfs/backend/backendtest"
)

// isGet reports a blob download (not a listing or HEAD).
func isGet(r *http.Request) bool {
	return r.Method == http.MethodGet && !strings.Contains(r.URL.RawQuery, "comp=")
}

func TestThrottlingIsRetried(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			f := newFixture(t, "")
			data := backendtest.PatternBytes("t/x", 300_000)
			f.Put(t, "t/x", data)
			var refuse atomic.Int64
			p := newProxy(t, f.srv, answering(func(r *http.Request) int {
				if refuse.Add(-1) >= 0 {
					return status
				}
				return 0
			}))
			o := f.opts
			o.Endpoint = p.endpoint()
			refuse.Store(3) // the check in New is throttled 3 times
			b := f.open(t, o)
			e, err := b.Stat(t.Context(), "t/x")
			if err != nil {
				t.Fatal(err)
			}
			refuse.Store(4) // and the first chunks of the read
			got := make([]byte, len(data))
			n, err := b.ReadAt(t.Context(), "t/x", e.Version, got, 0)
			if n != len(data) || err != nil || string(got) != string(data) {
				t.Fatalf("ReadAt = %d, %v (bytes equal: %v); want %d, nil", n, err, string(got) == string(data), len(data))
			}
			st := b.Stats()
			if st.Throttled != 7 || st.Retries < 7 {
				t.Errorf("Stats = %+v; want Throttled 7 and Retries >= 7", st)
			}
		})
	}
}

func TestThrottlingOutlastsRetries(t *testing.T) {
	f := newFixture(t, "")
	f.Put(t, "x", []byte("hello"))
	p := newProxy(t, f.srv, answering(func(*http.Request) int { return http.StatusServiceUnavailable }))
	o := f.opts
	o.Endpoint, o.MaxRetries = p.endpoint(), 2
	_, err := azblob.New(t.Context(), o)
	if !errors.Is(err, backend.ErrThrottled) {
		t.Fatalf("New against a store that always answers 503: %v; want ErrThrottled", err)
	}
	if got := p.requests.Load(); got != 3 {
		t.Errorf("%d requests reached the store; want 1 + 2 retries", got)
	}
}

func TestConnectionRefusedFailsInBoundedTime(t *testing.T) {
	f := newFixture(t, "")
	f.Put(t, "x", []byte("hello"))
	p := newProxy(t, f.srv, nil)
	o := f.opts
	o.Endpoint, o.MaxRetries = p.endpoint(), 3
	b := f.open(t, o)
	e, err := b.Stat(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	p.Close() // nothing listens on the port any more

	start := time.Now()
	_, err = b.ReadAt(t.Context(), "x", e.Version, make([]byte, 5), 0)
	took := time.Since(start)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) {
		t.Fatalf("ReadAt with the store gone: %v; want a network error", err)
	}
	if took > 10*time.Second {
		t.Errorf("ReadAt took %v to fail; want a few retries of ~50 ms", took)
	}
	if st := b.Stats(); st.Retries < 3 {
		t.Errorf("Stats = %+v; want 3 retries of the read", st)
	}

	// New fails the same way, before anything is mounted.
	start = time.Now()
	if _, err := azblob.New(t.Context(), o); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("New against a closed port: %v after %v; want an error within seconds", err, time.Since(start))
	}
}

// TestOverwriteDuringReadIsStale replaces a blob between the chunks of one
// read: the read fails with ErrStale and never returns bytes of both.
func TestOverwriteDuringReadIsStale(t *testing.T) {
	f := newFixture(t, "")
	const size = 1 << 20
	v1 := backendtest.PatternBytes("v1", size)
	v2 := backendtest.PatternBytes("v2", size)
	f.Put(t, "blob", v1)
	var gets atomic.Int64
	overwrite := f.srv.Client(t, f.container).NewBlockBlobClient("blob")
	p := newProxy(t, f.srv, answering(func(r *http.Request) int {
		if isGet(r) && gets.Add(1) == 3 {
			// Before the third chunk is served. (Not f.Put: this runs
			// on the proxy's goroutine, where t.Fatal is not allowed.)
			if _, err := overwrite.UploadBuffer(r.Context(), v2, nil); err != nil {
				t.Errorf("overwrite: %v", err)
			}
		}
		return 0
	}))
	o := f.opts
	o.Endpoint, o.Concurrency, o.BlockSize = p.endpoint(), 1, 64<<10
	b := f.open(t, o)
	e, err := b.Stat(t.Context(), "blob")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	n, err := b.ReadAt(t.Context(), "blob", e.Version, buf, 0)
	if !errors.Is(err, backend.ErrStale) {
		t.Fatalf("ReadAt across an overwrite = %d, %v; want ErrStale", n, err)
	}
	if gets.Load() != 3 {
		t.Errorf("%d GETs; want the read to stop at the first refused chunk (3)", gets.Load())
	}

	// The new version reads whole and right.
	e2, err := b.Stat(t.Context(), "blob")
	if err != nil || e2.Version == e.Version {
		t.Fatalf("Stat after overwrite = %+v, %v; want a new version", e2, err)
	}
	n, err = b.ReadAt(t.Context(), "blob", e2.Version, buf, 0)
	if n != size || (err != nil && err != io.EOF) || string(buf) != string(v2) {
		t.Fatalf("ReadAt of the new version = %d, %v; want all of v2", n, err)
	}
}

// TestBrokenBodyIsResumed cuts a download mid-body: the SDK's retry reader
// resumes it, pinned to the same version.
func TestBrokenBodyIsResumed(t *testing.T) {
	f := newFixture(t, "")
	const size = 200_000
	data := backendtest.PatternBytes("cut", size)
	f.Put(t, "cut", data)
	var cut atomic.Bool
	cut.Store(true)
	// The first GET gets half its body, then the connection drops.
	p := newProxy(t, f.srv, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isGet(r) && cut.CompareAndSwap(true, false) {
				next.ServeHTTP(&cutWriter{ResponseWriter: w, left: size / 2}, r)
				panic(http.ErrAbortHandler)
			}
			next.ServeHTTP(w, r)
		})
	})
	o := f.opts
	o.Endpoint, o.BlockSize = p.endpoint(), size
	b := f.open(t, o)
	e, err := b.Stat(t.Context(), "cut")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	n, err := b.ReadAt(t.Context(), "cut", e.Version, buf, 0)
	if n != size || err != nil || string(buf) != string(data) {
		t.Fatalf("ReadAt with a broken body = %d, %v; want the whole blob", n, err)
	}
	if cut.Load() {
		t.Fatalf("the body was never cut")
	}
}

// cutWriter passes on the headers and the first left bytes of a body.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.left <= 0 {
		return 0, errors.New("cut")
	}
	if len(p) > w.left {
		p = p[:w.left]
	}
	n, err := w.ResponseWriter.Write(p)
	w.left -= n
	if w.left == 0 {
		if fl, ok := w.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
	}
	return n, err
}
