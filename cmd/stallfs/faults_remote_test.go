package main

// Object-store faults through a real mount: the stallfs binary mounts a
// bucket of versitygw (S3) or a container of Azurite through a fault proxy
// (backend/throttle/faultproxy) on 127.0.0.1 that answers 429 or 503,
// cuts bodies short mid-stream, or never answers; and an S3 object is
// replaced while an epoch reads it. Every byte a reader gets is compared
// with the source; every read has a deadline.

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend/azblob/azuritetest"
	"github.com/stallfs/stallfs/backend/s3/s3test"
	"github.com/stallfs/stallfs/backend/throttle/faultproxy"
)

// remoteData is a dataset in an object store: paths and sizes.
type remoteData struct {
	files []string
	sizes map[string]int
}

// newRemoteData uploads n files of minSize..minSize+200 KB with put.
func newRemoteData(n, minSize int, put func(p string, data []byte)) *remoteData {
	d := &remoteData{sizes: map[string]int{}}
	for i := range n {
		p := fmt.Sprintf("train/c%d/%04d.bin", i%4, i)
		size := minSize + (i*104729)%200_000
		put(p, pattern(p, size))
		d.files = append(d.files, p)
		d.sizes[p] = size
	}
	return d
}

// read reads p through mnt: nil with every byte checked, or the read's
// error. A short or wrong read fails the test.
func (d *remoteData) read(t *testing.T, mnt, p string) error {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
	if err != nil {
		return err
	}
	if len(got) != d.sizes[p] || !bytes.Equal(got, pattern(p, len(got))) {
		t.Errorf("%s: %d bytes read differ from the source (%d bytes)", p, len(got), d.sizes[p])
	}
	return nil
}

// readAll reads every file with 4 readers and returns the first error.
func (d *remoteData) readAll(t *testing.T, mnt string) error {
	t.Helper()
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := r; i < len(d.files); i += 4 {
				if err := d.read(t, mnt, d.files[i]); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// s3ObjectGET matches S3 object reads (not listings).
func s3ObjectGET(r *http.Request) bool {
	return r.Method == http.MethodGet && !r.URL.Query().Has("list-type")
}

// azBlobGET matches Azure blob reads (not listings or properties).
func azBlobGET(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodGet && q.Get("comp") == "" && q.Get("restype") == ""
}

// s3ThroughProxy starts versitygw with n files and a fault proxy in front
// of it, and mounts the bucket through the proxy with flags.
func s3ThroughProxy(t *testing.T, n, minSize int, flags ...string) (*remoteData, *faultproxy.Proxy, string, *mountProc, func(p string, data []byte)) {
	t.Helper()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	put := func(p string, data []byte) { srv.Put(t, bucket, p, data) }
	d := newRemoteData(n, minSize, put)
	px, err := faultproxy.Start(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	mnt := testMountpoint(t)
	proc := startForeground(t, "s3://"+bucket, mnt, append([]string{"--s3-endpoint", px.URL(), "--s3-path-style"}, flags...)...)
	return d, px, mnt, proc, put
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// S3 answering 429 to a burst of GETs: retried, every byte right. Then 503
// to every GET: EIO within a bound, the cause logged once; then the store
// answers again and the same file reads right.
func TestFaultS3ThrottledThenUnavailable(t *testing.T) {
	d, px, mnt, proc, _ := s3ThroughProxy(t, 16, 20_000, "--cache-mem", "0")
	const burst = 6
	px.Set(faultproxy.Burst(http.StatusTooManyRequests, burst, s3ObjectGET))
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("429 burst of %d: %v", burst, err)
	}
	if c := px.Counters(); c.Faulted != burst {
		t.Errorf("the proxy answered 429 to %d GETs, want %d", c.Faulted, burst)
	}

	px.Set(faultproxy.Fault{Mode: faultproxy.Status, Status: http.StatusServiceUnavailable, Match: s3ObjectGET})
	p := d.files[0]
	var err error
	took := timed(func() { err = d.read(t, mnt, p) })
	t.Logf("persistent 503: %v after %v, %d GETs refused", err, took.Round(time.Millisecond), px.Counters().Faulted-burst)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read under persistent 503: %v, want EIO", err)
	}
	// 4 tries of the mount, each 5 SDK attempts with backoffs of at most
	// 2 s: at most 32 s of backoff.
	if took > 45*time.Second {
		t.Errorf("read under persistent 503 took %v", took)
	}
	// The log line reaches the test through a pipe: wait for it.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(proc.stderr.String(), "backend read failed") && time.Now().Before(deadline); {
		<-time.After(10 * time.Millisecond) // poll interval, not a synchronisation
	}
	if n := strings.Count(proc.stderr.String(), "backend read failed"); n != 1 {
		t.Errorf("the item failed after 4 tries is logged %d times, want once:\n%s", n, proc.stderr.String())
	}
	px.Set(faultproxy.Fault{})
	if err := d.read(t, mnt, p); err != nil {
		t.Errorf("read after the store recovered: %v", err)
	}
}

// S3 bodies cut short mid-stream: the backend asks again from where the
// body stopped; every byte right.
func TestFaultS3BodyCut(t *testing.T) {
	d, px, mnt, _, _ := s3ThroughProxy(t, 12, 300_000, "--cache-mem", "0")
	const cuts = 8
	px.Set(faultproxy.Fault{Mode: faultproxy.Cut, CutAfter: 100_000, Count: cuts, Match: s3ObjectGET})
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("bodies cut after 100 KB: %v", err)
	}
	c := px.Counters()
	t.Logf("%d requests, %d bodies cut after 100 KB", c.Requests, c.Faulted)
	if c.Faulted != cuts {
		t.Errorf("cut %d bodies, want %d", c.Faulted, cuts)
	}
}

// An S3 object replaced while an epoch reads it (8 readers, no cache):
// every read is the whole old version or EIO (stale), never the new
// version's bytes and never a mix; reads after the epoch agree.
func TestFaultS3ReplacedDuringEpoch(t *testing.T) {
	d, _, mnt, _, put := s3ThroughProxy(t, 24, 100_000, "--cache-mem", "0")
	replaced := map[string]bool{}
	for i, p := range d.files {
		if i%2 == 0 {
			replaced[p] = true
		}
	}
	var reads, stale atomic.Int64
	check := func(p string) {
		got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
		reads.Add(1)
		switch {
		case errors.Is(err, syscall.EIO) && replaced[p]:
			stale.Add(1)
		case err != nil:
			t.Errorf("%s: %v (replaced: %v)", p, err, replaced[p])
		case bytes.Equal(got, pattern(p, d.sizes[p])):
		case bytes.Equal(got, pattern(p+"#v2", d.sizes[p])):
			t.Errorf("%s: the new version was served for a size listed at mount time", p)
		default:
			t.Errorf("%s: %d bytes that are neither version (a mix?)", p, len(got))
		}
	}
	half := make(chan struct{})
	var once sync.Once
	var done atomic.Int64
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			for i := range 2 * len(d.files) {
				check(d.files[(i+3*r)%len(d.files)])
				if done.Add(1) == int64(len(d.files)) {
					once.Do(func() { close(half) })
				}
			}
		})
	}
	<-half
	for p := range replaced {
		put(p, pattern(p+"#v2", d.sizes[p])) // same size, other bytes
	}
	wg.Wait()
	before := stale.Load()
	for _, p := range d.files {
		check(p)
	}
	t.Logf("%d reads, %d stale (EIO), %d of them after the epoch", reads.Load(), stale.Load(), stale.Load()-before)
	if stale.Load()-before != int64(len(replaced)) {
		t.Errorf("after the epoch %d replaced files failed as stale, want all %d", stale.Load()-before, len(replaced))
	}
}

// azThroughProxy starts Azurite with n files and a fault proxy in front of
// it, and mounts the container through the proxy with flags.
func azThroughProxy(t *testing.T, n, minSize int, flags ...string) (*remoteData, *faultproxy.Proxy, string) {
	t.Helper()
	srv := azuritetest.Start(t)
	cont := srv.NewContainer(t)
	d := newRemoteData(n, minSize, func(p string, data []byte) { srv.Put(t, cont, p, data) })
	px, err := faultproxy.Start(strings.TrimSuffix(srv.Endpoint, "/"+azuritetest.Account))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	t.Setenv("STALLFS_AZURE_ACCOUNT_KEY", azuritetest.Key)
	mnt := testMountpoint(t)
	args := append([]string{"--azure-endpoint", px.URL() + "/" + azuritetest.Account,
		"--azure-retry-delay", "20ms", "--azure-max-retry-delay", "200ms"}, flags...)
	startForeground(t, "az://"+azuritetest.Account+"/"+cont, mnt, args...)
	return d, px, mnt
}

// Azure: a 429 burst is retried; bodies cut short mid-stream are resumed
// or retried; every byte right. Then a store that never answers: with a
// 1 s try timeout, EIO in bounded time; answered again, the file reads.
func TestFaultAzureThrottledCutHung(t *testing.T) {
	d, px, mnt := azThroughProxy(t, 12, 300_000, "--cache-mem", "0", "--azure-try-timeout", "1s", "--azure-max-retries", "2")
	const burst = 4
	px.Set(faultproxy.Fault{Mode: faultproxy.Status, Status: http.StatusTooManyRequests, Code: "ServerBusy", Count: burst, Match: azBlobGET})
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("429 burst: %v", err)
	}
	if c := px.Counters(); c.Faulted != burst {
		t.Errorf("the proxy answered 429 to %d GETs, want %d", c.Faulted, burst)
	}

	const cuts = 8
	before := px.Counters().Faulted
	px.Set(faultproxy.Fault{Mode: faultproxy.Cut, CutAfter: 100_000, Count: cuts, Match: azBlobGET})
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("bodies cut after 100 KB: %v", err)
	}
	if n := px.Counters().Faulted - before; n != cuts {
		t.Errorf("cut %d bodies, want %d", n, cuts)
	}

	px.Set(faultproxy.Fault{Mode: faultproxy.Blackhole, Match: azBlobGET})
	var err error
	took := timed(func() { err = d.read(t, mnt, d.files[0]) })
	t.Logf("store not answering: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read from a store that never answers: %v, want EIO", err)
	}
	// 4 tries of the mount x 3 tries of 1 s, plus backoffs of at most 200 ms.
	if took > 20*time.Second {
		t.Errorf("read from a store that never answers took %v", took)
	}
	px.Set(faultproxy.Fault{})
	if err := d.readAll(t, mnt); err != nil {
		t.Errorf("after the store answered again: %v", err)
	}
}
