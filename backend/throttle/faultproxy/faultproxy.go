// Package faultproxy is an HTTP reverse proxy on 127.0.0.1 that injects
// faults between a client and an object store or a peer: bursts of 503 or
// 429 answers, bodies cut short after K bytes, requests never answered
// (a blackhole: the client sees a partition or a store that hangs), and
// bodies replaced by garbage of the same length. It is a testing aid for
// the S3, Azure and peer fault tests; it uses the standard library only
// and never listens beyond 127.0.0.1.
//
// The fault is changed at any time with Set; requests already being
// answered keep the fault they started with.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
)

// Mode is what the proxy does with a request that a Fault applies to.
type Mode int

const (
	// Pass forwards the request unchanged.
	Pass Mode = iota
	// Status answers with Fault.Status (503, 429, ...) and an error body
	// in the S3 and Azure style, without asking the target.
	Status
	// Cut forwards the request but ends the answer after Fault.CutAfter
	// bytes of the body (headers, Content-Length included, are the
	// target's), then drops the connection.
	Cut
	// Blackhole accepts the request and never answers it; the request
	// ends when the client gives up or the proxy is closed.
	Blackhole
	// Garbage forwards the request and answers with the target's status
	// and headers but random bytes of the same length as the body.
	Garbage
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Status:
		return "status"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
	case Garbage:
		return "garbage"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Fault says which requests get which fault. The zero value passes
// everything.
type Fault struct {
	Mode Mode
	// Count is how many matching requests get the fault, counted from the
	// Set that installed it; later ones pass (0: every matching request).
	Count int
	// Status is the HTTP status of Mode Status (0: 503).
	Status int
	// Code is the error code of Mode Status, sent as an S3 XML <Code> and
	// as Azure's x-ms-error-code header (empty: SlowDown for 503,
	// TooManyRequests for 429, InternalError otherwise).
	Code string
	// CutAfter is how many body bytes Mode Cut lets through.
	CutAfter int64
	// Match selects the requests the fault applies to (nil: all).
	Match func(*http.Request) bool
}

// Burst is a Fault answering the first n matching requests with status.
func Burst(status, n int, match func(*http.Request) bool) Fault {
	return Fault{Mode: Status, Status: status, Count: n, Match: match}
}

// Counters are totals since the proxy started.
type Counters struct {
	// Requests counts every request the proxy received.
	Requests int64
	// Faulted counts the requests that got a fault (any Mode but Pass).
	Faulted int64
}

// Proxy is a running fault proxy. It is safe for concurrent use.
type Proxy struct {
	// immutable after Start
	url    string
	srv    *http.Server
	rp     *httputil.ReverseProxy
	closed chan struct{}

	mu    sync.Mutex
	fault Fault // guarded by mu
	left  int   // guarded by mu: requests the fault still applies to (Count > 0)

	requests, faulted atomic.Int64
	closeOnce         sync.Once
}

// Start starts a proxy to target (an http:// URL; its path is ignored: the
// request's path is kept) on a free port of 127.0.0.1, passing everything
// until Set is called.
func Start(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: want http://HOST:PORT", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{url: "http://" + ln.Addr().String(), closed: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The Host header stays the proxy's: a signed request (S3
			// SigV4) signed it.
			r.Out.URL.Scheme = u.Scheme
			r.Out.URL.Host = u.Host
		},
		ErrorLog: log.New(io.Discard, "", 0),
		// Bodies are relayed as they come, so a cut lands mid-stream.
		FlushInterval: -1,
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return p.url }

// Addr is the proxy's HOST:PORT.
func (p *Proxy) Addr() string { return p.url[len("http://"):] }

// Set installs f for the requests that arrive from now on.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.left = f, f.Count
}

// Counters returns the totals so far.
func (p *Proxy) Counters() Counters {
	return Counters{Requests: p.requests.Load(), Faulted: p.faulted.Load()}
}

// Close stops the proxy: it stops listening, ends blackholed requests and
// closes every connection.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return p.srv.Close()
}

// pick returns the fault of request r and counts it.
func (p *Proxy) pick(r *http.Request) Fault {
	p.requests.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if f.Mode == Pass || (f.Match != nil && !f.Match(r)) {
		return Fault{}
	}
	if f.Count > 0 {
		if p.left <= 0 {
			return Fault{}
		}
		p.left--
	}
	p.faulted.Add(1)
	return f
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	f := p.pick(r)
	switch f.Mode {
	case Status:
		writeStatus(w, f)
	case Blackhole:
		select {
		case <-r.Context().Done():
		case <-p.closed:
		}
		panic(http.ErrAbortHandler) // drop the connection, never answer
	case Cut:
		p.rp.ServeHTTP(&cutWriter{ResponseWriter: w, left: f.CutAfter}, r)
	case Garbage:
		p.rp.ServeHTTP(&garbageWriter{ResponseWriter: w}, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// writeStatus answers like an S3 or Azure store refusing the request.
func writeStatus(w http.ResponseWriter, f Fault) {
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	code := f.Code
	if code == "" {
		switch status {
		case http.StatusServiceUnavailable:
			code = "SlowDown"
		case http.StatusTooManyRequests:
			code = "TooManyRequests"
		default:
			code = "InternalError"
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+
		`</Code><Message>fault injected by faultproxy</Message><RequestId>faultproxy</RequestId></Error>`)
}

// errCut ends a cut answer inside the reverse proxy's copy loop.
var errCut = errors.New("faultproxy: body cut")

// cutWriter passes left body bytes, then aborts the connection.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) <= c.left {
		c.left -= int64(len(b))
		return c.ResponseWriter.Write(b)
	}
	n, _ := c.ResponseWriter.Write(b[:c.left])
	c.left = 0
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	// The reverse proxy sees the error and aborts the handler, which
	// closes the connection before the body is complete.
	return n, errCut
}

func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// garbageWriter replaces every body byte with a random one.
type garbageWriter struct {
	http.ResponseWriter
}

func (g *garbageWriter) Write(b []byte) (int, error) {
	junk := make([]byte, len(b))
	for i := range junk {
		junk[i] = byte(rand.Uint32())
	}
	return g.ResponseWriter.Write(junk)
}

func (g *garbageWriter) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
