package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// proxy is a reverse proxy in front of an S3 server whose hook sees every
// object GET (not listings) first and may answer it itself.
type proxy struct {
	url  string
	gets atomic.Int64 // object GETs seen
	// hook, when set, runs for each object GET with its 1-based number;
	// it returns true when it answered the request.
	hook func(n int64, w http.ResponseWriter, r *http.Request) bool
	// body, when set, wraps the body of each proxied object GET.
	body func(n int64, rc io.ReadCloser) io.ReadCloser
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if n, ok := resp.Request.Context().Value(getNumKey{}).(int64); ok && p.body != nil {
			resp.Body = p.body(n, resp.Body)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") {
			n := p.gets.Add(1)
			if p.hook != nil && p.hook(n, w, r) {
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), getNumKey{}, n))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

type getNumKey struct{}

// slowDown answers like S3 under too much load.
func slowDown(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>test</RequestId></Error>`)
}

// versityObject starts a server, stores size bytes of the pattern at
// path in a fresh bucket and returns the store and the object's version.
func versityObject(t *testing.T, path string, size int) (*s3test.Server, *store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	st := newVersityStore(t, srv, "")
	st.Put(t, path, backendtest.PatternBytes(path, size))
	return srv, st
}

func TestSlowDownRetried(t *testing.T) {
	const path, size = "obj.bin", 100_000
	_, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	const refusals = 3
	px.hook = func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if n <= refusals {
			slowDown(w)
			return true
		}
		return false
	}
	b := st.open(t, Options{Endpoint: px.url, MaxBackoff: 20 * time.Millisecond})
	v := mustVersion(t, b, path)
	p := make([]byte, size)
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	if n != size || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt through %d SlowDowns = %d, %v; want %d bytes", refusals, n, err, size)
	}
	checkPattern(t, path, p, 0)
	if got := px.gets.Load(); got != refusals+1 {
		t.Errorf("object GETs = %d, want %d (%d refused, 1 served)", got, refusals+1, refusals)
	}
}

func TestSlowDownExhausted(t *testing.T) {
	const path = "obj.bin"
	_, st := versityObject(t, path, 1000)
	px := newProxy(t, st.endpoint)
	px.hook = func(_ int64, w http.ResponseWriter, _ *http.Request) bool { slowDown(w); return true }
	b := st.open(t, Options{Endpoint: px.url, MaxBackoff: 10 * time.Millisecond, MaxRetries: 2})
	v := mustVersion(t, b, path)
	n, err := b.ReadAt(t.Context(), path, v, make([]byte, 10), 0)
	if n != 0 || !errors.Is(err, backend.ErrThrottled) {
		t.Errorf("ReadAt against a store that always throttles = %d, %v; want 0, ErrThrottled", n, err)
	}
	if got := px.gets.Load(); got != 3 {
		t.Errorf("object GETs = %d, want 3 (MaxRetries 2)", got)
	}
}

// cutBody passes limit bytes, then runs at once and fails like a
// connection that broke.
type cutBody struct {
	rc    io.ReadCloser
	limit int64
	at    func()
	once  sync.Once
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		c.once.Do(c.at)
		return 0, errors.New("test: connection cut")
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.rc.Read(p)
	c.limit -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

func TestBodyCutIsResumed(t *testing.T) {
	const path, size = "obj.bin", 3 << 20
	_, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	var ranges []string
	var mu sync.Mutex
	px.hook = func(_ int64, _ http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		return false
	}
	px.body = func(n int64, rc io.ReadCloser) io.ReadCloser {
		if n <= 2 { // the first two responses break after 1 MiB
			return &cutBody{rc: rc, limit: 1 << 20, at: func() {}}
		}
		return rc
	}
	b := st.open(t, Options{Endpoint: px.url, MaxBackoff: 10 * time.Millisecond})
	v := mustVersion(t, b, path)
	p := make([]byte, size)
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	if n != size || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt with two cut bodies = %d, %v; want %d", n, err, size)
	}
	checkPattern(t, path, p, 0)
	want := []string{"bytes=0-3145727", "bytes=1048576-3145727", "bytes=2097152-3145727"}
	if strings.Join(ranges, " ") != strings.Join(want, " ") {
		t.Errorf("ranges asked = %q, want %q (resume where the body broke)", ranges, want)
	}
}

func TestServerKilledMidRead(t *testing.T) {
	const path, size = "obj.bin", 4 << 20
	srv, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	px.body = func(_ int64, rc io.ReadCloser) io.ReadCloser {
		return &cutBody{rc: rc, limit: 1 << 20, at: srv.Stop}
	}
	b := st.open(t, Options{Endpoint: px.url, MaxBackoff: 50 * time.Millisecond, Timeout: 5 * time.Second})
	v := mustVersion(t, b, path)
	p := make([]byte, size)
	start := time.Now()
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	took := time.Since(start)
	if err == nil || err == io.EOF {
		t.Fatalf("ReadAt with the server killed = %d, %v; want an error", n, err)
	}
	if n >= size {
		t.Errorf("ReadAt returned n = %d with error %v", n, err)
	}
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		t.Errorf("error %v carries errno %v; the fs layer would return it instead of EIO", err, errno)
	}
	if took > 10*time.Second {
		t.Errorf("ReadAt took %v to fail; want bounded retries", took)
	}
	select {
	case <-srv.Exited():
	default:
		t.Errorf("server still running")
	}
	t.Logf("failed after %v: %v", took, err)
}

func TestReplacedBetweenParts(t *testing.T) {
	const path, size = "obj.bin", 4 << 20
	_, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	other := bytes.Repeat([]byte{0xEE}, size)
	px.hook = func(n int64, _ http.ResponseWriter, _ *http.Request) bool {
		if n == 2 { // the second part: replace the object before it is served
			st.PutKey(t, path, other)
		}
		return false
	}
	b := st.open(t, Options{Endpoint: px.url, PartSize: 1 << 20, Concurrency: 1})
	v := mustVersion(t, b, path)
	p := make([]byte, size)
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	if !errors.Is(err, backend.ErrStale) || n != 0 {
		t.Fatalf("ReadAt across a replacement = %d, %v; want 0, ErrStale", n, err)
	}
	var pe *iofs.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		t.Errorf("error %v is not a *PathError naming %q", err, path)
	}
}

func TestReplacedDuringCutBody(t *testing.T) {
	const path, size = "obj.bin", 2 << 20
	_, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	other := bytes.Repeat([]byte{0xEE}, size)
	px.body = func(n int64, rc io.ReadCloser) io.ReadCloser {
		if n == 1 {
			// Half the old bytes arrive, then the object is replaced and
			// the connection breaks: the resumed GET must not add new bytes.
			return &cutBody{rc: rc, limit: 1 << 20, at: func() { st.PutKey(t, path, other) }}
		}
		return rc
	}
	b := st.open(t, Options{Endpoint: px.url, MaxBackoff: 10 * time.Millisecond})
	v := mustVersion(t, b, path)
	p := make([]byte, size)
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	if !errors.Is(err, backend.ErrStale) || n != 0 {
		t.Fatalf("ReadAt with a replacement mid-body = %d, %v; want 0, ErrStale", n, err)
	}
}

func TestParallelPartsBounded(t *testing.T) {
	const path, size = "big.bin", 9<<20 + 123
	_, st := versityObject(t, path, size)
	px := newProxy(t, st.endpoint)
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	px.hook = func(_ int64, _ http.ResponseWriter, _ *http.Request) bool {
		cur := inFlight.Add(1)
		for {
			old := peak.Load()
			if cur <= old || peak.CompareAndSwap(old, cur) {
				break
			}
		}
		if cur == 3 {
			close(release) // all three slots are busy at once
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second): // a guard against hanging, not a synchronisation
			t.Errorf("never 3 parts in flight at once")
		}
		inFlight.Add(-1)
		return false
	}
	b := st.open(t, Options{Endpoint: px.url, PartSize: 1 << 20, Concurrency: 3})
	v := mustVersion(t, b, path)
	p := make([]byte, size+1000)
	n, err := b.ReadAt(t.Context(), path, v, p, 0)
	if n != size || err != io.EOF {
		t.Fatalf("ReadAt past the end of a %d-byte object = %d, %v; want %d, io.EOF", size, n, err, size)
	}
	checkPattern(t, path, p[:n], 0)
	if got := peak.Load(); got != 3 {
		t.Errorf("peak parts in flight = %d, want 3 (Concurrency)", got)
	}
	// 10 parts of at most 1 MiB cover p; the last one meets the end.
	if got := px.gets.Load(); got != 10 {
		t.Errorf("object GETs = %d, want 10", got)
	}
}

func mustVersion(t *testing.T, b *Backend, path string) string {
	t.Helper()
	e, err := b.Stat(t.Context(), path)
	if err != nil {
		t.Fatalf("Stat(%q): %v", path, err)
	}
	return e.Version
}

func checkPattern(t *testing.T, path string, p []byte, off int64) {
	t.Helper()
	want := make([]byte, len(p))
	backendtest.Pattern(path, off, want)
	if !bytes.Equal(p, want) {
		for i := range p {
			if p[i] != want[i] {
				t.Fatalf("%s: byte at %d = %#x, want %#x", path, off+int64(i), p[i], want[i])
			}
		}
	}
}
