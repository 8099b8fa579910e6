package fs

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stallfs/stallfs/stats"
)

// Bytes read with source Backend equal the bytes the backend served, so
// the stats agree with an independent count of backend bytes: an item the
// cache admitted while it was read in parts counts as the backend's until
// read once, and readers that joined one fill share its bytes.
func TestReadAccountingMatchesBackendBytes(t *testing.T) {
	const size = 300_000
	tests := []struct {
		name        string
		budget      int64 // cache budget
		readers     int
		part        int   // read size
		wantBackend int64 // -1: only at most what the backend served
		wantMemory  int64
	}{
		{"admitted, read in parts", 1 << 30, 1, 64 << 10, size, 0},
		{"admitted, two readers in parts", 1 << 30, 2, 64 << 10, size, size},
		{"not cached, whole, two readers", 0, 2, size, size, size},
		{"not cached, parts, one reader", 0, 1, 64 << 10, size, 0},
		// The recent buffer drops an item once its size was handed out,
		// to anyone: the slower reader fetches it again and leaves part
		// of that fetch unread.
		{"not cached, parts, two readers", 0, 2, 64 << 10, -1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newFakeBackend(map[string]int64{"a/img.jpg": size})
				b.delay = 20 * time.Millisecond
				rec := &recorder{}
				o := readerOptions{recorder: rec}
				if tc.budget > 0 {
					o.cache = &fakeCache{budget: tc.budget}
				}
				r := testReader(t, b, o)
				f := refOf(b, "a/img.jpg")
				var wg sync.WaitGroup
				for range tc.readers {
					wg.Go(func() {
						buf := make([]byte, tc.part)
						for off := int64(0); off < size; off += int64(tc.part) {
							n, err := r.read(t.Context(), f, nil, buf, off)
							if err != nil {
								t.Error(err)
								return
							}
							checkPat(t, "read", buf[:n], seedOf(f.path), off)
						}
					})
				}
				wg.Wait()
				served := b.reads.Load() * size
				if got := rec.bytes[stats.Backend]; tc.wantBackend >= 0 && (got != served || got != tc.wantBackend) ||
					got > served || got < size {
					t.Errorf("backend bytes recorded %d, backend served %d, want %d", got, served, tc.wantBackend)
				}
				if got := rec.bytes[stats.Memory]; tc.wantMemory >= 0 && got != tc.wantMemory {
					t.Errorf("memory bytes recorded %d, want %d", got, tc.wantMemory)
				}
				if got, want := rec.bytes[stats.Backend]+rec.bytes[stats.Memory], int64(tc.readers*size); got != want {
					t.Errorf("bytes recorded %d, read %d", got, want)
				}
				if rec.blocked < 20*time.Millisecond*time.Duration(tc.readers) {
					t.Errorf("stall %v, want at least 20ms per reader", rec.blocked)
				}
				// Read through once: the next pass is all cache hits.
				if tc.budget > 0 {
					beforeB, beforeM := rec.bytes[stats.Backend], rec.bytes[stats.Memory]
					if _, err := r.read(t.Context(), f, nil, make([]byte, size), 0); err != nil {
						t.Fatal(err)
					}
					if rec.bytes[stats.Backend] != beforeB || rec.bytes[stats.Memory] != beforeM+size {
						t.Errorf("second pass: backend %d -> %d, memory %d -> %d; want all %d from memory",
							beforeB, rec.bytes[stats.Backend], beforeM, rec.bytes[stats.Memory], size)
					}
					if r.owed.n.Load() != 0 {
						t.Errorf("%d owed ledgers left after the item was read through", r.owed.n.Load())
					}
				}
			})
		})
	}
}
