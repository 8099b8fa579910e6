package azblob_test

import (
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

// proxy is a reverse proxy to Azurite whose hook sees every request first
// and may answer it itself (a non-zero status) instead of forwarding it.
type proxy struct {
	*httptest.Server
	hook     func(r *http.Request) int
	requests atomic.Int64
}

func newProxy(t *testing.T, srv *azuritetest.Server, hook func(r *http.Request) int) *proxy {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &proxy{hook: hook}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.hook != nil {
			if status := p.hook(r); status != 0 {
				w.Header().Set("x-ms-error-code", "ServerBusy")
				w.WriteHeader(status)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// endpoint is the proxy's blob service URL.
func (p *proxy) endpoint() string { return p.URL + "/" + azuritetest.Account }
