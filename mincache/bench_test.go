package mincache

import (
	"sync/atomic"
	"testing"
)

const benchItem = 110 << 10 // a typical ImageNet JPEG

// BenchmarkReadAtHit: parallel memory-tier hits of 110 KiB items.
func BenchmarkReadAtHit(b *testing.B) {
	const items = 512
	c := mustOpen(b, Options{MemBytes: items * benchItem})
	data := content(key(0), benchItem)
	for i := range items {
		c.Admit(key(i), data)
	}
	keys := make([]Key, items)
	for i := range keys {
		keys[i] = key(i)
	}
	benchReadHits(b, c, keys)
}

// BenchmarkReadAtHitDisk: parallel disk-tier hits of 110 KiB items (entry
// files in the page cache: this is the tier's CPU cost, open + pread +
// CRC32C + close).
func BenchmarkReadAtHitDisk(b *testing.B) {
	const items = 256
	c := mustOpen(b, Options{DiskBytes: 1 << 30, Dir: b.TempDir(), Source: "bench"})
	data := content(key(0), benchItem)
	keys := make([]Key, items)
	for i := range keys {
		keys[i] = key(i)
		c.Admit(keys[i], data)
	}
	benchReadHits(b, c, keys)
}

// benchReadHits times parallel whole-item reads of keys (all cached, each
// benchItem bytes), every goroutine going through them from its own
// starting point; a miss fails the benchmark.
func benchReadHits(b *testing.B, c *Cache, keys []Key) {
	b.Helper()
	var next atomic.Int64
	b.SetBytes(benchItem)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, benchItem)
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			if n, _, ok := c.ReadAt(keys[i%len(keys)], buf, 0); !ok || n != benchItem {
				b.Errorf("miss")
				return
			}
		}
	})
}

// BenchmarkAdmit: admissions of distinct 110 KiB items into memory.
func BenchmarkAdmit(b *testing.B) {
	benchAdmit(b, Options{MemBytes: 256 << 20}, Memory)
}

// BenchmarkAdmitDisk: admissions of distinct 110 KiB items into the disk
// tier (write to tmp/, rename, append an index record).
func BenchmarkAdmitDisk(b *testing.B) {
	benchAdmit(b, Options{DiskBytes: 256 << 20, Dir: b.TempDir(), Source: "bench"}, Disk)
}

func benchAdmit(b *testing.B, opts Options, want Tier) {
	c := mustOpen(b, opts)
	data := content(key(0), benchItem)
	keys := make([]Key, 2048)
	for i := range keys {
		keys[i] = key(i)
	}
	b.SetBytes(benchItem)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := keys[i%len(keys)]
		if i%len(keys) == 0 && i > 0 || c.Admit(k, data) != want {
			b.StopTimer()
			if err := c.Drop(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if c.Admit(k, data) != want {
				b.Fatal("not admitted after Drop")
			}
		}
	}
}
