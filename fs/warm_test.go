package fs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWarmTwiceBeforeRead is the prefetcher running into the next epoch:
// a file warmed for epoch e+1 while still staged for its read in epoch e
// is fetched again and held for both reads, so neither misses, and each
// read costs one backend read of the file (staging is not a cache).
func TestWarmTwiceBeforeRead(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	const p, seed, size = "class00/img000.jpg", 5, 50_000
	writePat(t, filepath.Join(src, p), seed, size)
	b := &countingBackend{dirBackend: dirBackend{root: src}}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(t.Context(), mnt, b, Options{ControlSocket: filepath.Join(t.TempDir(), "c.sock"), BufferBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmount() })
	for i, want := range []int64{size, 2 * size} {
		fetched, err := m.Warm(t.Context(), p)
		if err != nil || !fetched {
			t.Fatalf("warm %d: fetched %v, err %v", i+1, fetched, err)
		}
		if got := b.bytes.Load(); got != want {
			t.Fatalf("after warm %d: backend read %d bytes, want %d", i+1, got, want)
		}
	}
	read := func() {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			t.Fatal(err)
		}
		checkPat(t, p, got, seed, 0)
	}
	read()
	read()
	if got := b.bytes.Load(); got != 2*size {
		t.Errorf("two reads after two warms: backend read %d bytes, want %d (both staged)", got, 2*size)
	}
	read() // staging let go of it: a third read goes to the backend
	if got := b.bytes.Load(); got != 3*size {
		t.Errorf("third read: backend read %d bytes, want %d", got, 3*size)
	}
}
