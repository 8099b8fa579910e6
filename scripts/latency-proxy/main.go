// Command latency-proxy is a benchmarking aid: an HTTP reverse proxy on
// 127.0.0.1 in front of an S3 server (versitygw) that emulates remote
// storage the same way for every client behind it (make bench-e2e puts
// rclone and stallfs there): each request waits -latency before it is
// forwarded, and all response bodies together are paced to -bandwidth.
// It counts the body bytes of object GETs (a path below the bucket),
// which is what a benchmark calls the bytes read from storage, and serves
// the count on -stats-listen:
//
//	GET /  ->  "get_bytes N\nrequests N\n"
//
// The Host header is passed through unchanged, so S3 signatures made for
// the proxy's address verify at the server. Only 127.0.0.1 addresses are
// accepted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"

	"github.com/stallfs/stallfs/backend/throttle"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve the proxy on")
	stats := flag.String("stats-listen", "", "address to serve the byte counter on (none if empty)")
	target := flag.String("target", "", "the server's base URL (http://127.0.0.1:PORT)")
	latency := flag.Duration("latency", 0, "delay before each request is forwarded")
	bw := flag.String("bandwidth", "", "pace all response bodies together to RATE per second (e.g. 100MB); none if empty")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("latency-proxy: ")
	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || !local(u.Host) {
		log.Fatalf("-target %q: want http://127.0.0.1:PORT", *target)
	}
	for _, a := range []string{*listen, *stats} {
		if a != "" && !local(a) {
			log.Fatalf("%q: only 127.0.0.1 addresses", a)
		}
	}
	var rate int64
	if *bw != "" {
		r, err := humanize.ParseBytes(strings.TrimSuffix(*bw, "/s"))
		if err != nil || r == 0 {
			log.Fatalf("-bandwidth %q: want a rate such as 100MB", *bw)
		}
		rate = int64(r)
	}
	p := &proxy{latency: *latency}
	if rate > 0 {
		// One byte of burst: bodies are paced from the first byte, as a
		// link of that rate would.
		p.pace = throttle.NewLimiter(rate, 1)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // stream each body write at once, paced
	rp.ModifyResponse = p.modify
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *stats != "" {
		sln, err := net.Listen("tcp", *stats)
		if err != nil {
			log.Fatal(err)
		}
		go http.Serve(sln, http.HandlerFunc(p.serveStats)) //nolint:errcheck // ends with the process
	}
	srv := &http.Server{Handler: p.delay(rp), ReadHeaderTimeout: time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Println(ln.Addr().String()) // the address, for a caller that asked for port 0
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// local reports whether hostport is on 127.0.0.1.
func local(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	return err == nil && h == "127.0.0.1"
}

type proxy struct {
	latency  time.Duration     // immutable
	pace     *throttle.Limiter // immutable; nil: no pacing
	getBytes atomic.Int64
	requests atomic.Int64
}

// delay holds each request for the latency, then forwards it.
func (p *proxy) delay(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.latency > 0 {
			t := time.NewTimer(p.latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// modify paces every response body and counts an object GET's.
func (p *proxy) modify(resp *http.Response) error {
	r := resp.Request
	var n *atomic.Int64
	if r.Method == http.MethodGet && strings.Contains(strings.Trim(r.URL.Path, "/"), "/") {
		n = &p.getBytes
	}
	resp.Body = &body{rc: resp.Body, ctx: r.Context(), pace: p.pace, n: n}
	return nil
}

func (p *proxy) serveStats(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintf(w, "get_bytes %d\nrequests %d\n", p.getBytes.Load(), p.requests.Load())
}

// body paces and counts the bytes read from a response body.
type body struct {
	rc   io.ReadCloser
	ctx  context.Context
	pace *throttle.Limiter
	n    *atomic.Int64 // nil: not counted
}

func (b *body) Read(buf []byte) (int, error) {
	if len(buf) > 64<<10 {
		buf = buf[:64<<10] // pace in small steps
	}
	n, err := b.rc.Read(buf)
	if n > 0 {
		if b.n != nil {
			b.n.Add(int64(n))
		}
		if werr := b.pace.Wait(b.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

func (b *body) Close() error { return b.rc.Close() }
