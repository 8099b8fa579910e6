package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stallfs/stallfs/stats"
)

var _ = Peers((*fakePeers)(nil))

// fakePeers owns the paths in remote; its owner serves pattern items, or
// fails while fail is set.
type fakePeers struct {
	mu      sync.Mutex
	remote  map[string]bool
	fetches atomic.Int64
	fail    atomic.Bool
}

func (p *fakePeers) Remote(path, version string, chunk int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remote[path]
}

func (p *fakePeers) Fetch(ctx context.Context, path, version string, chunk, itemLen int64) ([]byte, error) {
	p.fetches.Add(1)
	if p.fail.Load() {
		return nil, errors.New("peer refused")
	}
	buf := make([]byte, itemLen)
	fillPat(buf, seedOf(path), chunk*(4<<20))
	return buf, nil
}

// TestPeersReadPath: items another member owns come from it, are recorded
// as peer bytes and not cached here (unless CacheOthers); own items are
// filled from the backend and cached; a failing peer falls back to the
// backend with correct bytes and is not cached either.
func TestPeersReadPath(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cacheOthers bool
		fail        bool
		wantFetches int64
		wantBackend int64 // backend reads
		wantSrc     [4]int64
	}{
		{name: "owner serves", wantFetches: 3, wantBackend: 1,
			wantSrc: [4]int64{stats.Memory: 2 * 2000, stats.Peer: 3 * 1000, stats.Backend: 2000}},
		{name: "cache others", cacheOthers: true, wantFetches: 1, wantBackend: 1,
			wantSrc: [4]int64{stats.Memory: 2*2000 + 2*1000, stats.Peer: 1000, stats.Backend: 2000}},
		{name: "peer fails", fail: true, wantFetches: 3, wantBackend: 4,
			wantSrc: [4]int64{stats.Memory: 2 * 2000, stats.Backend: 3*1000 + 2000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend(map[string]int64{"theirs": 1000, "mine": 2000})
			c := &fakeCache{budget: 1 << 20}
			rec := &recorder{}
			r := testReader(t, b, readerOptions{cache: c, recorder: rec})
			p := &fakePeers{remote: map[string]bool{"theirs": true}}
			p.fail.Store(tc.fail)
			r.peer.peers, r.peer.cacheOthers = p, tc.cacheOthers
			for range 3 {
				for _, name := range []string{"theirs", "mine"} {
					f := refOf(b, name)
					buf := make([]byte, f.size)
					if n, err := r.read(t.Context(), f, nil, buf, 0); err != nil || n != len(buf) {
						t.Fatalf("read %s: %d, %v", name, n, err)
					}
					checkPat(t, name, buf, seedOf(name), 0)
				}
			}
			if got := p.fetches.Load(); got != tc.wantFetches {
				t.Errorf("peer fetches = %d, want %d", got, tc.wantFetches)
			}
			if got := b.reads.Load(); got != tc.wantBackend {
				t.Errorf("backend reads = %d, want %d", got, tc.wantBackend)
			}
			if rec.bytes != tc.wantSrc {
				t.Errorf("bytes by source (memory, disk, peer, backend) = %v, want %v", rec.bytes, tc.wantSrc)
			}
			wantFallbacks := int64(0)
			if tc.fail {
				wantFallbacks = 3
			}
			if got := r.peer.fallbacks.Load(); got != wantFallbacks {
				t.Errorf("fallbacks = %d, want %d", got, wantFallbacks)
			}
			if got := r.peer.backend.Load(); got != tc.wantSrc[stats.Backend] {
				t.Errorf("backend bytes counted = %d, want %d", got, tc.wantSrc[stats.Backend])
			}
		})
	}
}

// TestServeItem serves items of a mounted dataset to peers: bytes by
// chunk, admitted on the first request so the second is a cache hit, and
// nothing outside the dataset.
func TestServeItem(t *testing.T) {
	src := t.TempDir()
	files := makeDataset(t, src)
	b := &countingBackend{dirBackend: dirBackend{root: src}}
	c := &fakeCache{budget: 1 << 30}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	const chunk = 1 << 20
	m, err := New(t.Context(), mnt, b, Options{
		ChunkSize:     chunk,
		Cache:         c,
		ControlSocket: filepath.Join(t.TempDir(), "c.sock"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmount() })
	big := "class00/img000.jpg" // several chunks (see makeDataset)
	id, ok := m.FileID(big)
	if !ok {
		t.Fatal("no", big)
	}
	ref := m.fileRef(id)
	items := (ref.size + chunk - 1) / chunk
	for k := range items {
		for round := range 2 {
			got, err := m.ServeItem(t.Context(), big, ref.version, k)
			if err != nil {
				t.Fatalf("chunk %d: %v", k, err)
			}
			if want := min(chunk, ref.size-k*chunk); int64(len(got)) != want {
				t.Fatalf("chunk %d round %d: %d bytes, want %d", k, round, len(got), want)
			}
			checkPat(t, big, got, files[big], k*chunk)
		}
	}
	if got := b.bytes.Load(); got != ref.size {
		t.Errorf("backend bytes = %d, want %d (each chunk once, then from the cache)", got, ref.size)
	}
	for _, tc := range []struct {
		path, version string
		chunk         int64
	}{
		{"class00/nope.jpg", ref.version, 0},
		{big, ref.version + "x", 0},
		{big, ref.version, items},
		{big, ref.version, -1},
		{"class00", "", 0},
		{"../" + filepath.Base(src) + "/" + big, ref.version, 0},
	} {
		if _, err := m.ServeItem(t.Context(), tc.path, tc.version, tc.chunk); !errors.Is(err, iofs.ErrNotExist) {
			t.Errorf("ServeItem(%q, %q, %d) = %v, want ErrNotExist", tc.path, tc.version, tc.chunk, err)
		}
	}
}
