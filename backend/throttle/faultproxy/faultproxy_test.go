package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// body is the upstream's answer to every request: 64 KiB of a pattern.
var body = func() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

func start(t *testing.T) *Proxy {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Up", "1")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// get fetches path through p with a 5 s deadline.
func get(t *testing.T, p *Proxy, path string) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return getCtx(ctx, p, path)
}

func getCtx(ctx context.Context, p *Proxy, path string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+path, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestPassAndBurst(t *testing.T) {
	p := start(t)
	if resp, b, err := get(t, p, "/x"); err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) {
		t.Fatalf("pass: %v, %v, %d bytes", err, resp, len(b))
	}
	onlyY := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/y") }
	p.Set(Burst(http.StatusTooManyRequests, 2, onlyY))
	if resp, _, err := get(t, p, "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unmatched request: %v %v", err, resp)
	}
	for i := range 2 {
		resp, b, err := get(t, p, "/y")
		if err != nil || resp.StatusCode != 429 || resp.Header.Get("x-ms-error-code") != "TooManyRequests" || !bytes.Contains(b, []byte("<Code>TooManyRequests</Code>")) {
			t.Fatalf("burst request %d: %v, %v, %q", i, err, resp, b)
		}
	}
	if resp, b, err := get(t, p, "/y"); err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) {
		t.Fatalf("after the burst: %v %v", err, resp)
	}
	if c := p.Counters(); c.Requests != 5 || c.Faulted != 2 {
		t.Errorf("counters %+v, want 5 requests, 2 faulted", c)
	}
}

func TestCut(t *testing.T) {
	p := start(t)
	p.Set(Fault{Mode: Cut, CutAfter: 1000, Count: 1})
	resp, b, err := get(t, p, "/x")
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut body: err %v, want unexpected EOF", err)
	}
	if resp.ContentLength != int64(len(body)) || len(b) != 1000 || !bytes.Equal(b, body[:1000]) {
		t.Fatalf("cut body: Content-Length %d, got %d bytes (want the first 1000 of the target's)", resp.ContentLength, len(b))
	}
	if _, b, err := get(t, p, "/x"); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("after the cut: %v, %d bytes", err, len(b))
	}
}

func TestBlackholeAndGarbage(t *testing.T) {
	p := start(t)
	p.Set(Fault{Mode: Blackhole})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if _, _, err := getCtx(ctx, p, "/x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blackhole: %v, want the client's deadline", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("blackholed request took %v to give up", d)
	}
	p.Set(Fault{Mode: Garbage})
	resp, b, err := get(t, p, "/x")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Up") != "1" || len(b) != len(body) || bytes.Equal(b, body) {
		t.Fatalf("garbage: %v %v, %d bytes, equal to the target's: %v", err, resp, len(b), bytes.Equal(b, body))
	}
	p.Set(Fault{})
	if _, b, err := get(t, p, "/x"); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("pass again: %v", err)
	}
}

func TestCloseEndsBlackholedRequests(t *testing.T) {
	p := start(t)
	p.Set(Fault{Mode: Blackhole})
	done := make(chan error, 1)
	go func() {
		_, _, err := get(t, p, "/x")
		done <- err
	}()
	// Wait until the request reached the proxy, then close it.
	deadline := time.Now().Add(5 * time.Second)
	for p.Counters().Faulted == 0 {
		if time.Now().After(deadline) {
			t.Fatal("request never reached the proxy")
		}
		<-time.After(time.Millisecond) // poll interval, not a synchronisation
	}
	_ = p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("blackholed request answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the blackholed request")
	}
}
