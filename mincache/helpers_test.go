package mincache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
)

// pattern is the deterministic content of the item seeded by seed: any byte
// can be checked from its offset alone.
func pattern(seed uint64, off int64) byte {
	return byte(patternWord(seed, off/8) >> (8 * (off % 8)))
}

func patternWord(seed uint64, w int64) uint64 {
	x := uint64(w)*0x9E3779B97F4A7C15 ^ seed
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>32
}

func seedOf(k Key) uint64 { return hashVersion(fmt.Sprintf("%s|%s|%d", k.Path, k.Version, k.Chunk)) }

// content returns the full content of k (size bytes).
func content(k Key, size int) []byte {
	b := make([]byte, size)
	fillPattern(b, seedOf(k), 0)
	return b
}

func fillPattern(b []byte, seed uint64, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))%8 != 0; i++ {
		b[i] = pattern(seed, off+int64(i))
	}
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord(seed, (off+int64(i))/8))
	}
	for ; i < len(b); i++ {
		b[i] = pattern(seed, off+int64(i))
	}
}

// checkBytes fails t unless got is bytes [off, off+len(got)) of k.
func checkBytes(t testing.TB, k Key, got []byte, off int64) {
	t.Helper()
	want := make([]byte, len(got))
	fillPattern(want, seedOf(k), off)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%v: wrong bytes at offset %d (read at %d, len %d)", k, off+int64(i), off, len(got))
	}
}

func key(i int) Key {
	return Key{Path: fmt.Sprintf("train/class%03d/img%06d.jpg", i%100, i), Version: "v1"}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func mustOpen(t testing.TB, opts Options) *Cache {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	c, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readFull reads all of k (size bytes) and checks it.
func readFull(t testing.TB, c *Cache, k Key, size int) (Tier, bool) {
	t.Helper()
	buf := make([]byte, size)
	n, tier, ok := c.ReadAt(k, buf, 0)
	if !ok {
		return None, false
	}
	if n != size {
		t.Fatalf("ReadAt(%v) n = %d, want %d", k, n, size)
	}
	checkBytes(t, k, buf, 0)
	return tier, true
}
