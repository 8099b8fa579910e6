package main

// Fuzz targets of the command's input parsers and of the mount's control
// socket. Each has a seed corpus, so plain `go test` (and `make test`) runs
// every seed in milliseconds; `make fuzz` runs each target for FUZZTIME.
// The property everywhere: no panic, no hang, and garbage is refused with
// a usage error (parsers) or a 4xx status (control socket), never accepted
// as something else.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/prefetch"
	"github.com/stallfs/stallfs/stats"
)

// isUsage reports whether err is a usage error (exit status 2).
func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"", "/data/train", "rel/dir", "file:///data", "file://localhost/data", "file://host/x",
		"file://", "az://acct/container/prefix", "AZ://a/b", "s3://bucket/key?region=x",
		"s3://", "gs://x", "://", "s3://%zz", "file:///a/../b", "a://b://c", "\x00://x",
		"s3://user:pass@host/bucket", "file:///%00",
	} {
		f.Add(s)
	}
	schemes := []string{"file", "az", "s3"}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseSource(s, schemes)
		if err != nil {
			if !isUsage(err) {
				t.Fatalf("parseSource(%q): %v is not a usage error", s, err)
			}
			return
		}
		switch u.Scheme {
		case "file":
			if !filepath.IsAbs(u.Path) || u.Host != "" {
				t.Fatalf("parseSource(%q) = %q: a file source must be an absolute local path", s, u)
			}
		case "az", "s3":
		default:
			t.Fatalf("parseSource(%q): scheme %q is not a known one", s, u.Scheme)
		}
		_ = u.Redacted()
	})
}

func FuzzParseSizeRateDuration(f *testing.F) {
	for _, s := range []string{
		"", "0", "1", "4MiB", "1G", "65536", "1.5GB", "-1", "1e30", "18446744073709551615",
		"9223372036854775808", "100MB/s", "1GiB/s", "/s", "5ms", "3s", "-1s", "1h30m",
		"9999999999h", "NaN", "Inf", "0x10", " 1 KiB ", "1 EiB",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseSize("x", s, 0, 1<<50); err != nil {
			if !isUsage(err) {
				t.Fatalf("parseSize(%q): %v is not a usage error", s, err)
			}
		} else if n < 0 || n > 1<<50 {
			t.Fatalf("parseSize(%q) = %d, outside [0, 2^50]", s, n)
		}
		if n, err := parseSize("x", s, 4096, maxChunkSize); err == nil && (n < 4096 || n > maxChunkSize) {
			t.Fatalf("parseSize(%q, 4096, %d) = %d, outside the range", s, maxChunkSize, n)
		}
		if n, err := parseRate("x", s); err != nil {
			if !isUsage(err) {
				t.Fatalf("parseRate(%q): %v is not a usage error", s, err)
			}
		} else if n < 1 || n > 1<<50 {
			t.Fatalf("parseRate(%q) = %d, outside [1, 2^50]", s, n)
		}
		if d, err := parseDuration("x", s); err != nil {
			if !isUsage(err) {
				t.Fatalf("parseDuration(%q): %v is not a usage error", s, err)
			}
		} else if d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
		_, _ = parseLogLevel(s)
	})
}

func FuzzBlobfuse2Config(f *testing.F) {
	for _, s := range []string{
		"",
		"azstorage:\n  account-name: a\n  container: c\n  mode: key\n  account-key: k\n",
		"azstorage:\n  type: block\n  account-name: a\n  container: c\n  endpoint: 127.0.0.1:10000/a\n  use-http: true\n",
		"azstorage:\n  type: adls\n  account-name: a\n  container: c\n  subdirectory: /x/y/\n  max-retries: 5\n  max-concurrency: 32\n  block-size-mb: 16\n",
		"file_cache:\n  path: /tmp/c\n  max-size-mb: 4096\nblock_cache:\n  mem-size-mb: 100\n  path: /x\n  disk-size-mb: 9\n",
		"libfuse:\n  attribute-expiration-sec: 120\n  entry-expiration-sec: 60\n  negative-entry-expiration-sec: 0\nallow-other: true\nread-only: true\n",
		"components:\n  - libfuse\n  - file_cache\n  - azstorage\n",
		"azstorage:\n  max-retries: -1\n", "azstorage:\n  block-size-mb: 99999999999999999999\n",
		"azstorage: [1, 2]\n", "azstorage:\n  account-name: [a]\n", "a: &x [*x]\n", "{", "- - -",
		"azstorage:\n  type: nfs\n", "allow-other: maybe\n", "libfuse:\n  attribute-expiration-sec: 1e300\n",
		"AzStorage:\n  Account-Name: a\n  CONTAINER: c\n", "? [a, b]\n: c\n", "1: 2\n", "~: x\n",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "config.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := loadBlobfuse2(path)
		if err != nil {
			if !isUsage(err) {
				t.Fatalf("loadBlobfuse2: %v is not a usage error", err)
			}
			return
		}
		if b.MemBytes < 0 || b.DiskBytes < 0 || b.BlockSize < 0 || b.MaxRetries < 0 || b.Concurrency < 0 ||
			b.AttrTimeout < 0 || b.EntryTimeout < 0 || b.NegativeTimeout < 0 || b.TryTimeout < 0 {
			t.Fatalf("loadBlobfuse2 accepted a negative value: %+v", *b)
		}
		if s, err := b.source(); err == nil {
			if _, err := parseSource(s, []string{"az"}); err != nil && !isUsage(err) {
				t.Fatalf("source %q: %v", s, err)
			}
		}
	})
}

// fuzzWarmer is a Warmer that fetches nothing.
type fuzzWarmer struct{}

func (fuzzWarmer) Warm(context.Context, string) (bool, error) { return false, nil }

// fuzzControl is the control socket's handlers over a real stats recorder,
// a real memory-tier cache and a real prefetcher of a small layout, routed
// as fs.Mount routes them.
func fuzzControl(f *testing.F) http.Handler {
	f.Helper()
	var paths []string
	for i := range 50 {
		paths = append(paths, fmt.Sprintf("train/c%d/%03d.JPEG", i%5, i))
	}
	layout, err := prefetch.NewLayout(paths)
	if err != nil {
		f.Fatal(err)
	}
	spec := prefetch.Spec{Order: prefetch.OrderTorchRandom, Seed: 1, HasSeed: true}
	readers, err := prefetch.BuildReaders(spec, layout.Len())
	if err != nil {
		f.Fatal(err)
	}
	c, err := mincache.Open(mincache.Options{MemBytes: 1 << 20, Source: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	log := slog.New(slog.DiscardHandler)
	p := &pipeline{log: log, cache: c}
	p.rec = stats.New(stats.Options{Files: layout.Len(), DatasetBytes: 1 << 20, CacheBytes: 1 << 20, CacheFill: p.cacheFill})
	p.pf = prefetch.NewReaders(layout, readers, fuzzWarmer{}, prefetch.Options{Logger: log})
	f.Cleanup(p.pf.Close)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/stats", http.HandlerFunc(p.serveStats))
	mux.Handle("POST /v1/epoch", http.HandlerFunc(p.serveEpoch))
	mux.Handle("GET /v1/cache", http.HandlerFunc(p.serveCacheInfo))
	mux.Handle("POST /v1/cache/drop", http.HandlerFunc(p.serveCacheDrop))
	mux.Handle("GET /v1/order", http.HandlerFunc(p.serveOrder))
	mux.Handle("POST /v1/order", http.HandlerFunc(p.serveOrderSet))
	return mux
}

func FuzzControlAPI(f *testing.F) {
	type seed struct{ method, target, body string }
	for _, s := range []seed{
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/stats?files=3", ""},
		{"GET", "/v1/stats?files=-1", ""},
		{"GET", "/v1/stats?files=99999999999999999999", ""},
		{"POST", "/v1/epoch", `{"epoch":2}`},
		{"POST", "/v1/epoch", `{"epoch":-1}`},
		{"POST", "/v1/epoch", `{"epoch":1e99}`},
		{"POST", "/v1/epoch", `[`},
		{"GET", "/v1/cache", ""},
		{"POST", "/v1/cache/drop", ""},
		{"GET", "/v1/order?epoch=1&limit=5", ""},
		{"GET", "/v1/order?epoch=9223372036854775807", ""},
		{"GET", "/v1/order?reader=nobody", ""},
		{"GET", "/v1/order?limit=-3", ""},
		{"POST", "/v1/order", `{"order":"torch-random","seed":7,"has_seed":true,"epoch":3}`},
		{"POST", "/v1/order", `{"order":"torch-distributed","world_size":4,"ranks":[0,1,2,3],"seed":1}`},
		{"POST", "/v1/order", `{"order":"torch-distributed","world_size":0,"rank":5}`},
		{"POST", "/v1/order", `{"order":"torch-global","rng_state":"AAAA"}`},
		{"POST", "/v1/order", `{"order":"torch-random","num_samples":100,"replacement":true,"torch_version":"1.13"}`},
		{"POST", "/v1/order", `{"order":"torch-random","num_samples":-1}`},
		{"POST", "/v1/order", `{"order":"dali-file","dali":{"shuffle_after_epoch":true,"seed":3}}`},
		{"POST", "/v1/order", `{"order":"list","epoch":-5}`},
		{"POST", "/v1/order", `{"order":"sequential","torch_version":"x.y"}`},
		{"POST", "/v1/order", `{"order":"nope"}`},
		{"POST", "/v1/order", `null`},
		{"DELETE", "/v1/cache", ""},
		{"GET", "/v1/../v1/stats", ""},
	} {
		f.Add(s.method, s.target, s.body)
	}
	h := fuzzControl(f)
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		if _, err := url.ParseRequestURI(target); err != nil {
			return // not a request line a client can send
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://stallfs"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s with body %q: no answer in 10s", method, target, body)
		}
		code := w.Code
		if code >= 500 && !(code == http.StatusInternalServerError && strings.HasPrefix(w.Body.String(), "drop:")) {
			t.Fatalf("%s %s with body %q: %d %s", method, target, body, code, w.Body.String())
		}
		if code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			if _, err := io.Copy(io.Discard, w.Body); err != nil {
				t.Fatal(err)
			}
		}
	})
}
