package peers

import (
	"bytes"
	"context"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzPeerServer sends the item server arbitrary requests, signed with the
// group secret or carrying an arbitrary token. It must not panic; an
// unsigned request gets 401, a signed one for anything but a known item
// gets a 4xx, and a 200 carries exactly the item with its checksum.
func FuzzPeerServer(f *testing.F) {
	for _, s := range []struct {
		method, target, token string
		signed                bool
	}{
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v1&chunk=0", "", true},
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v1&chunk=0", "", false},
		{"GET", "/v1/item?path=..%2Fetc%2Fpasswd&version=v1&chunk=0", "", true},
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v2&chunk=-1", "", true},
		{"GET", "/v1/item?path=a%2Fb.jpg&chunk=99999999999999999999", "", true},
		{"GET", "/v1/item?path=%00&version=v1&chunk=0", "", true},
		{"GET", "/v1/health", "", true},
		{"POST", "/v1/item", "", true},
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v1&chunk=0", "1:zz", false},
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v1&chunk=0", "99999999999999999999:00", false},
		{"GET", "/v1/item?path=a%2Fb.jpg&version=v1&chunk=0", ":", false},
		{"GET", "/x", "", true},
	} {
		f.Add(s.method, s.target, s.token, s.signed)
	}
	src := &fakeSource{items: map[string]int64{"a/b.jpg": 5000, "c.bin": 0}}
	now := time.Unix(1_800_000_000, 0)
	h := &handler{src: src, secret: testSecret, now: func() time.Time { return now }, st: &serverStats{}}
	f.Fuzz(func(t *testing.T, method, target, token string, signed bool) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://peer"+target, nil)
		if err != nil {
			return
		}
		if signed {
			sign(req, testSecret, now)
		} else {
			req.Header.Set(AuthHeader, token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case !signed && w.Code != http.StatusUnauthorized && verify(req, testSecret, now) != nil:
			t.Fatalf("%s %s with token %q: %d, want 401", method, target, token, w.Code)
		case w.Code >= 500:
			t.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body.String())
		case w.Code == http.StatusOK && req.URL.Path == "/v1/item":
			q := req.URL.Query()
			size, ok := src.items[q.Get("path")]
			want := patternItem(q.Get("path"), 0, size)
			crc, err := strconv.ParseUint(w.Header().Get(CRCHeader), 10, 32)
			if !ok || !bytes.Equal(w.Body.Bytes(), want) || err != nil || uint32(crc) != crc32.Checksum(want, castagnoli) {
				t.Fatalf("%s %s: 200 with %d bytes and checksum %q, not the item", method, target, w.Body.Len(), w.Header().Get(CRCHeader))
			}
		}
	})
}

// peerAnswer is what the fuzzed peer answers to the next item request.
type peerAnswer struct {
	status int
	crc    string
	length string // Content-Length, "" = the body's
	body   []byte
}

// FuzzPeerGarbage makes a peer answer arbitrary status, checksum, length
// and body to item requests. Fetch must not panic or hang past the item
// timeout, and whatever it returns as data is itemLen bytes whose
// checksum is the one the peer claimed.
func FuzzPeerGarbage(f *testing.F) {
	item := patternItem("a/b.jpg", 0, 3000)
	good := strconv.FormatUint(uint64(crc32.Checksum(item, castagnoli)), 10)
	f.Add(200, good, "", item)
	f.Add(200, good, "", item[:2999])
	f.Add(200, good, "5000", item)
	f.Add(200, good, "3000", item[:100])
	f.Add(200, "", "", item)
	f.Add(200, "-1", "", item)
	f.Add(200, "4294967296", "", item)
	f.Add(200, "0", "", []byte{})
	f.Add(404, "", "", []byte("no such item"))
	f.Add(401, "", "", []byte{})
	f.Add(503, good, "", item)
	f.Add(200, good, "x", item)

	var mu sync.Mutex
	var ans peerAnswer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := ans
		mu.Unlock()
		if a.crc != "" {
			w.Header().Set(CRCHeader, a.crc)
		}
		if a.length != "" {
			w.Header().Set("Content-Length", a.length)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}))
	f.Cleanup(srv.Close)
	peer := strings.TrimPrefix(srv.URL, "http://")
	self := "127.0.0.1:1"
	g, err := New(Options{Self: self, Members: []string{self, peer}, Secret: testSecret, ItemTimeout: 2 * time.Second, ProbeInterval: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	m := g.members[1]
	f.Fuzz(func(t *testing.T, status int, crc, length string, body []byte) {
		if status < 200 || status > 599 || status == http.StatusSwitchingProtocols {
			status = 200
		}
		mu.Lock()
		ans = peerAnswer{status: status, crc: crc, length: length, body: body}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		data, err := g.fetch(ctx, m, "a/b.jpg", "v1", 0, int64(len(item)))
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("fetch took %v", d)
		}
		if err != nil {
			return
		}
		want, perr := strconv.ParseUint(crc, 10, 32)
		if len(data) != len(item) || perr != nil || crc32.Checksum(data, castagnoli) != uint32(want) {
			t.Fatalf("fetch returned %d bytes without a matching claimed checksum %q", len(data), crc)
		}
	})
}
