//go:build !race

// Memory figures mean nothing under the race detector (see rss_test.go).

package mincache

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// scaleItems is ImageNet-1k's training set (1,281,167 files), or
// MINCACHE_SCALE_ITEMS.
func scaleItems() int {
	if v, err := strconv.Atoi(os.Getenv("MINCACHE_SCALE_ITEMS")); err == nil && v > 0 {
		return v
	}
	return 1_281_167
}

// tinyItem is the size of the items of the scale benchmarks: the index,
// not the data, is what they measure.
const tinyItem = 64

// BenchmarkScaleAdmitMemory admits scaleItems tiny items into the memory
// tier, then times hits on keys spread over all of them: the cost of a
// lookup must not grow with the item count. It reports the index's heap
// bytes per item and the admission time per item.
func BenchmarkScaleAdmitMemory(b *testing.B) {
	n := scaleItems()
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = key(i)
	}
	data := content(keys[0], tinyItem)
	heap0 := heapAlloc()
	c, err := Open(Options{MemBytes: int64(n) * tinyItem})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	rss0 := rss(b)
	start := time.Now()
	for i := range keys {
		if c.Admit(keys[i], data) != Memory {
			b.Fatalf("item %d not admitted", i)
		}
	}
	admit := time.Since(start)
	heap, rssGrowth := heapAlloc()-heap0, rss(b)-rss0
	buf := make([]byte, tinyItem)
	i := 0
	for b.Loop() {
		if _, _, ok := c.ReadAt(keys[(i*7919)%n], buf, 0); !ok {
			b.Fatal("miss")
		}
		i++
	}
	b.ReportMetric(float64(admit.Nanoseconds())/float64(n), "ns/admit")
	b.ReportMetric(float64(heap)/float64(n), "index-heap-B/item")
	b.ReportMetric(float64(rssGrowth)/float64(n), "rss-B/item")
}

// BenchmarkScaleReopenDisk fills a disk tier with scaleItems tiny items
// once, closes it (the compacted index is written), and times Open: the
// index replay a remount does before it serves warm. It reports the
// reopened index's heap bytes per item.
func BenchmarkScaleReopenDisk(b *testing.B) {
	n := scaleItems()
	dir := b.TempDir()
	opts := Options{DiskBytes: 1 << 40, Dir: dir, Source: "scale"}
	c, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		k := key(i)
		if c.Admit(k, content(k, tinyItem)) != Disk {
			b.Fatalf("item %d not admitted", i)
		}
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	var heap int64
	for b.Loop() {
		heap0 := heapAlloc()
		c, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		if got := c.Info().Disk.Items; got != int64(n) {
			b.Fatalf("reopened with %d items, want %d", got, n)
		}
		heap = heapAlloc() - heap0
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(heap)/float64(n), "index-heap-B/item")
}
