package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// patternItem is the content of chunk of path: a deterministic pattern by
// offset.
func patternItem(path string, chunk, n int64) []byte {
	seed := uint64(hashString(path))
	b := make([]byte, n)
	for i := range b {
		off := uint64(chunk)*1<<20 + uint64(i)
		b[i] = byte(mix(seed^off>>3) >> (8 * (off & 7)))
	}
	return b
}

// fakeSource serves items of a fixed set of paths at version "v1".
type fakeSource struct {
	calls atomic.Int64
	items map[string]int64 // path -> size (one chunk)
}

func (s *fakeSource) ServeItem(ctx context.Context, path, version string, chunk int64) ([]byte, error) {
	s.calls.Add(1)
	n, ok := s.items[path]
	if !ok || version != "v1" || chunk != 0 {
		return nil, fmt.Errorf("item %s: %w", path, iofs.ErrNotExist)
	}
	return patternItem(path, chunk, n), nil
}

var testSecret = []byte("0123456789abcdef-group-secret")

func newTestGroup(t *testing.T, self string, members []string, o Options) *Group {
	t.Helper()
	o.Self, o.Members = self, members
	if o.Secret == nil {
		o.Secret = testSecret
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func get(t *testing.T, srvURL, target string, secret []byte, at time.Time) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srvURL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != nil {
		sign(req, secret, at)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestServerAuth(t *testing.T) {
	src := &fakeSource{items: map[string]int64{"a/b.jpg": 1000}}
	g := newTestGroup(t, "127.0.0.1:1", []string{"127.0.0.1:1"}, Options{})
	srv := httptest.NewServer(g.Handler(src))
	t.Cleanup(srv.Close)
	item := "/v1/item?" + url.Values{"path": {"a/b.jpg"}, "version": {"v1"}, "chunk": {"0"}}.Encode()
	now := time.Now()

	if resp := get(t, srv.URL, item, testSecret, now); resp.StatusCode != http.StatusOK {
		t.Fatalf("good token: %s", resp.Status)
	}
	bad := []struct {
		name string
		do   func() *http.Response
	}{
		{"no token", func() *http.Response { return get(t, srv.URL, item, nil, now) }},
		{"wrong secret", func() *http.Response { return get(t, srv.URL, item, []byte("wrong"), now) }},
		{"old token", func() *http.Response { return get(t, srv.URL, item, testSecret, now.Add(-time.Hour)) }},
		{"future token", func() *http.Response { return get(t, srv.URL, item, testSecret, now.Add(time.Hour)) }},
		{"health, wrong secret", func() *http.Response { return get(t, srv.URL, "/v1/health", []byte("wrong"), now) }},
		{"token of another request", func() *http.Response {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/item?path=other&version=v1&chunk=0", nil)
			sign(req, testSecret, now)
			req2, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+item, nil)
			req2.Header = req.Header
			resp, err := http.DefaultTransport.RoundTrip(req2)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp
		}},
		{"garbage token", func() *http.Response {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+item, nil)
			req.Header.Set(AuthHeader, strconv.FormatInt(now.Unix(), 10)+":zz")
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp
		}},
	}
	for _, tc := range bad {
		if resp := tc.do(); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: got %s, want 401", tc.name, resp.Status)
		}
	}
	if got := g.Stats().Served.Unauthorized; got != int64(len(bad)) {
		t.Errorf("unauthorized count = %d, want %d", got, len(bad))
	}
	if got := src.calls.Load(); got != 1 {
		t.Errorf("source asked %d times, want 1 (only for the good token)", got)
	}
	if resp := get(t, srv.URL, "/v1/health", testSecret, now); resp.StatusCode != http.StatusOK {
		t.Errorf("health: %s", resp.Status)
	}
}

func TestServerRejectsTraversal(t *testing.T) {
	src := &fakeSource{items: map[string]int64{"a/b.jpg": 1000}}
	g := newTestGroup(t, "127.0.0.1:1", []string{"127.0.0.1:1"}, Options{})
	srv := httptest.NewServer(g.Handler(src))
	t.Cleanup(srv.Close)
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "a/../../etc/passwd", "a/../b.jpg", "./a/b.jpg", "a//b.jpg", "a/b.jpg/", "", ".", "..", "a\\..\\b", "a/b.jpg\x00"} {
		target := "/v1/item?" + url.Values{"path": {p}, "version": {"v1"}, "chunk": {"0"}}.Encode()
		if resp := get(t, srv.URL, target, testSecret, time.Now()); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("path %q: got %s, want 400", p, resp.Status)
		}
	}
	for _, q := range []string{"path=a/b.jpg&version=v1&chunk=-1", "path=a/b.jpg&version=v1&chunk=x", "path=a/b.jpg&version=v1"} {
		if resp := get(t, srv.URL, "/v1/item?"+q, testSecret, time.Now()); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got %s, want 400", q, resp.Status)
		}
	}
	if n := src.calls.Load(); n != 0 {
		t.Errorf("the source was asked %d times for rejected paths", n)
	}
	// Well-formed, but not in the dataset or not at that version.
	for _, q := range []string{"path=etc/passwd&version=v1&chunk=0", "path=a/b.jpg&version=v2&chunk=0", "path=a/b.jpg&version=v1&chunk=1"} {
		if resp := get(t, srv.URL, "/v1/item?"+q, testSecret, time.Now()); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: got %s, want 404", q, resp.Status)
		}
	}
	if got := g.Stats().Served.Rejected; got != 15+3 {
		t.Errorf("rejected = %d, want 18", got)
	}
}

// twoMembers builds a group of this member and one httptest peer serving
// mk(the peer's own view of the group), and returns a path the peer owns.
func twoMembers(t *testing.T, mk func(peerView *Group) http.Handler, o Options) (*Group, string) {
	t.Helper()
	peer := httptest.NewUnstartedServer(nil)
	peerAddr := peer.Listener.Addr().String()
	self := "127.0.0.1:1" // never dialled
	members := []string{self, peerAddr}
	peer.Config.Handler = mk(newTestGroup(t, peerAddr, members, Options{}))
	peer.Start()
	t.Cleanup(peer.Close)
	g := newTestGroup(t, self, members, o)
	for i := range 1000 {
		p := "d/" + strconv.Itoa(i) + ".jpg"
		if g.Remote(p, "v1", 0) {
			return g, p
		}
	}
	t.Fatal("the peer owns none of 1000 paths")
	return nil, ""
}

func TestFetchVerifiesChecksum(t *testing.T) {
	src := &fakeSource{items: map[string]int64{}}
	var corrupt atomic.Bool
	mk := func(view *Group) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !corrupt.Load() {
				view.Handler(src).ServeHTTP(w, r)
				return
			}
			// A server that flips a byte after computing the checksum.
			rec := httptest.NewRecorder()
			view.Handler(src).ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			body[len(body)/2] ^= 0x40
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	}
	g, p := twoMembers(t, mk, Options{})
	src.items[p] = 70_000
	got, err := g.Fetch(t.Context(), p, "v1", 0, 70_000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, patternItem(p, 0, 70_000)) {
		t.Fatal("fetched item differs from the source")
	}
	corrupt.Store(true)
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 70_000); err == nil {
		t.Fatal("corrupted item was accepted")
	}
	// A wrong length is refused too.
	corrupt.Store(false)
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 69_999); err == nil {
		t.Fatal("item of the wrong length was accepted")
	}
	st := g.Stats()
	if st.Peers[0].BadChecksums != 1 || st.Peers[0].Failures != 2 || st.Peers[0].Requests != 3 {
		t.Errorf("peer stats = %+v, want 1 bad checksum, 2 failures of 3 requests", st.Peers[0])
	}
	if !st.Peers[0].Up {
		t.Error("a bad item marked the peer down")
	}
	if crc := crc32.Checksum(got, castagnoli); crc == 0 {
		t.Error("zero checksum")
	}
}

// TestServerRefusesItemsItDoesNotOwn: a member asked for an item it would
// itself fetch from another member answers 421 at once (no fill cycle
// between members that disagree on who is live), and the asker does not
// take the peer down for it.
func TestServerRefusesItemsItDoesNotOwn(t *testing.T) {
	src := &fakeSource{items: map[string]int64{}}
	peerAddr := "127.0.0.1:2" // never dialled
	srvGroup := newTestGroup(t, "127.0.0.1:1", []string{"127.0.0.1:1", peerAddr}, Options{})
	srv := httptest.NewServer(srvGroup.Handler(src))
	t.Cleanup(srv.Close)
	var theirs string
	for i := range 1000 {
		if p := "d/" + strconv.Itoa(i); srvGroup.Remote(p, "v1", 0) {
			theirs = p
			break
		}
	}
	src.items[theirs] = 10
	target := "/v1/item?" + url.Values{"path": {theirs}, "version": {"v1"}, "chunk": {"0"}}.Encode()
	if resp := get(t, srv.URL, target, testSecret, time.Now()); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("item owned elsewhere: %s, want 421", resp.Status)
	}
	if src.calls.Load() != 0 || srvGroup.Stats().Served.Misdirected != 1 {
		t.Errorf("source calls %d, misdirected %d; want 0 and 1", src.calls.Load(), srvGroup.Stats().Served.Misdirected)
	}
}

func TestFetchWrongSecretMarksDown(t *testing.T) {
	src := &fakeSource{items: map[string]int64{}}
	other, err := New(Options{Self: "127.0.0.1:1", Members: []string{"127.0.0.1:1"}, Secret: []byte("other secret")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	g, p := twoMembers(t, func(*Group) http.Handler { return other.Handler(src) }, Options{ProbeInterval: time.Hour})
	src.items[p] = 10
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 10); err == nil {
		t.Fatal("fetch from a peer with another secret succeeded")
	}
	if g.Stats().Peers[0].Up {
		t.Error("a peer that refuses our token is still up")
	}
	if other.Stats().Served.Unauthorized != 1 {
		t.Errorf("peer counted %d unauthorized requests, want 1", other.Stats().Served.Unauthorized)
	}
	if g.Remote(p, "v1", 0) {
		t.Error("the down peer still owns its item")
	}
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 10); !errors.Is(err, ErrNotPeer) {
		t.Errorf("fetch of an item now owned here: %v, want ErrNotPeer", err)
	}
}

// TestDeadPeerTimesOutAndRejoins: a peer that accepts connections but never
// answers costs one item timeout, is marked down, and is taken back once
// it answers health probes.
func TestDeadPeerTimesOutAndRejoins(t *testing.T) {
	src := &fakeSource{items: map[string]int64{}}
	var hang atomic.Bool
	hang.Store(true)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	mk := func(view *Group) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			view.Handler(src).ServeHTTP(w, r)
		})
	}
	g, p := twoMembers(t, mk, Options{ItemTimeout: 300 * time.Millisecond, ProbeInterval: 20 * time.Millisecond})
	src.items[p] = 100
	start := time.Now()
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 100); err == nil {
		t.Fatal("fetch from a hanging peer succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("fetch from a hanging peer took %v, want about the 300ms item timeout", d)
	}
	if g.Remote(p, "v1", 0) {
		t.Fatal("hanging peer not marked down")
	}
	hang.Store(false)
	once.Do(func() { close(release) })
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !g.Remote(p, "v1", 0) {
		select {
		case <-deadline:
			t.Fatal("peer not taken back within 10s of answering again")
		case <-tick.C:
		}
	}
	got, err := g.Fetch(t.Context(), p, "v1", 0, 100)
	if err != nil || !bytes.Equal(got, patternItem(p, 0, 100)) {
		t.Fatalf("fetch after rejoin: %v", err)
	}
}

func TestFetchRefusedConnectionMarksDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	self := "127.0.0.1:1"
	g := newTestGroup(t, self, []string{self, addr}, Options{ProbeInterval: time.Hour})
	var p string
	for i := range 1000 {
		if p = "d/" + strconv.Itoa(i); g.Remote(p, "v1", 0) {
			break
		}
	}
	if _, err := g.Fetch(t.Context(), p, "v1", 0, 10); err == nil {
		t.Fatal("fetch from nowhere succeeded")
	}
	if st := g.Stats(); st.Live != 1 || st.Peers[0].Up || st.Peers[0].DownSince.IsZero() {
		t.Errorf("stats after a refused connection = %+v, want the peer down", st)
	}
}

func TestNewRejectsBadMembership(t *testing.T) {
	for _, o := range []Options{
		{Self: "a:1", Members: []string{"a:1"}},                            // no secret
		{Self: "a:1", Members: []string{"b:1"}, Secret: testSecret},        // self missing
		{Self: "a:1", Members: []string{"a:1", "a:1"}, Secret: testSecret}, // duplicate
		{Self: "a", Members: []string{"a"}, Secret: testSecret},            // no port
	} {
		if g, err := New(o); err == nil {
			g.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// TestPeerBudgetReported: a live peer's cache budget comes with its health
// answer, asked once by the prober, and shows in Stats.
func TestPeerBudgetReported(t *testing.T) {
	var health atomic.Int64
	mk := func(view *Group) http.Handler {
		view.o.CacheBytes = 12345
		h := view.Handler(nil)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/health" {
				health.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	g, _ := twoMembers(t, mk, Options{ProbeInterval: 5 * time.Millisecond, CacheBytes: 999})
	if st := g.Stats(); st.CacheBytes != 999 || st.Peers[0].CacheBytes != -1 {
		t.Fatalf("before a probe: self %d, peer %d; want 999 and -1", st.CacheBytes, st.Peers[0].CacheBytes)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for g.Stats().Peers[0].CacheBytes != 12345 {
		if time.Now().After(deadline) {
			t.Fatalf("peer budget %d after 10s, want 12345", g.Stats().Peers[0].CacheBytes)
		}
		<-tick.C
	}
	n := health.Load()
	// Many probe intervals later the known budget is not asked again.
	for range 20 {
		<-tick.C
	}
	if d := health.Load() - n; d != 0 {
		t.Errorf("%d health requests after the budget was known, want 0", d)
	}
	if !g.Stats().Peers[0].Up {
		t.Errorf("peer marked down")
	}
}
