package azblob_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/azblob"
	"github.com/stallfs/stallfs/backend/azblob/azuritetest"
	"github.com/stallfs/stallfs/backend/backendtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	azuritetest.StopShared()
	os.Exit(code)
}

// fixture is a backendtest.Fixture over one fresh container, below prefix.
type fixture struct {
	srv       *azuritetest.Server
	container string
	prefix    string
	opts      azblob.Options
}

func newFixture(t *testing.T, prefix string) *fixture {
	srv := azuritetest.Shared(t)
	f := &fixture{srv: srv, container: srv.NewContainer(t), prefix: prefix}
	f.opts = azblob.Options{
		Account: azuritetest.Account, Container: f.container, Prefix: prefix,
		Endpoint:   srv.Endpoint,
		Credential: azblob.Credential{AccountKey: azuritetest.Key},
		RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond,
		BlockSize:    64 << 10, // exercise parallel chunks with the suite's sizes
		ListPageSize: 100,      // and listings of many pages
		// The suite's walks take the parallel path (not the default).
		ListConcurrency: 4,
	}
	return f
}

func (f *fixture) Put(t testing.TB, path string, data []byte) {
	name := path
	if f.prefix != "" {
		name = f.prefix + "/" + path
	}
	f.srv.Put(t, f.container, name, data)
}

func (f *fixture) Backend(t testing.TB) backend.Backend { return f.open(t, f.opts) }

func (f *fixture) open(t testing.TB, o azblob.Options) *azblob.Backend {
	t.Helper()
	b, err := azblob.New(t.Context(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture { return newFixture(t, "") })
}

func TestConformanceBelowPrefix(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		f := newFixture(t, "data/set")
		// Neighbours that the prefix must hide.
		f.srv.Put(t, f.container, "data/settle", []byte("x"))
		f.srv.Put(t, f.container, "data/other/y", []byte("y"))
		return f
	})
}

// proxy is a reverse proxy to Azurite, with a middleware to inject faults.
type proxy struct {
	*httptest.Server
	requests atomic.Int64
}

// newProxy starts a proxy to srv; mw (nil: none) wraps the forwarding
// handler.
func newProxy(t *testing.T, srv *azuritetest.Server, mw func(next http.Handler) http.Handler) *proxy {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var h http.Handler = rp
	if mw != nil {
		h = mw(rp)
	}
	p := &proxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// answering is a middleware that lets hook answer a request with a status
// of its own (non-zero) instead of forwarding it.
func answering(hook func(r *http.Request) int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if status := hook(r); status != 0 {
				w.Header().Set("x-ms-error-code", "ServerBusy")
				w.WriteHeader(status)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// endpoint is the proxy's blob service URL.
func (p *proxy) endpoint() string { return p.URL + "/" + azuritetest.Account }
