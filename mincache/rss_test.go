//go:build !race

// The race detector shadows every byte copied in or out of the arena, so
// these memory measurements only mean something without -race.

package mincache

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// rss returns VmRSS of this process in bytes.
func rss(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestRSSWithinBudget fills a 512 MiB arena with 110 KiB items and checks
// RSS <= 1.05 x budget + 150 MiB, with the bytes off the Go heap.
func TestRSSWithinBudget(t *testing.T) {
	const budget = 512 << 20
	const size = 110 << 10
	c := mustOpen(t, Options{MemBytes: budget})
	rss0, heap0 := rss(t), heapAlloc()
	data := content(key(0), size)
	var n int
	for ; c.Admit(key(n), data) == Memory; n++ {
	}
	buf := make([]byte, size)
	for _, i := range []int{0, n / 2, n - 1} {
		if _, _, ok := c.ReadAt(key(i), buf, 0); !ok {
			t.Fatalf("item %d missed", i)
		}
		checkBytes(t, key(0), buf, 0)
	}
	rss1, heap1 := rss(t), heapAlloc()
	t.Logf("%d items of %d B in a %d MiB arena: RSS %d -> %d MiB (limit %d MiB), HeapAlloc %d -> %d KiB",
		n, size, budget>>20, rss0>>20, rss1>>20, (budget*105/100+150<<20)>>20, heap0>>10, heap1>>10)
	if limit := int64(budget)*105/100 + 150<<20; rss1 > limit {
		t.Errorf("RSS %d MiB over the limit %d MiB", rss1>>20, limit>>20)
	}
	if rss1-rss0 < budget*9/10 {
		t.Errorf("RSS grew by %d MiB only: the arena is not what is measured", (rss1-rss0)>>20)
	}
	if heap1-heap0 > 16<<20 {
		t.Errorf("HeapAlloc grew by %d MiB: item bytes are on the Go heap", (heap1-heap0)>>20)
	}
	if err := c.Drop(); err != nil {
		t.Fatal(err)
	}
	rss2 := rss(t)
	t.Logf("after Drop: RSS %d MiB", rss2>>20)
	if rss1-rss2 < budget*9/10 {
		t.Errorf("Drop returned only %d MiB to the kernel", (rss1-rss2)>>20)
	}
}

// TestIndexBytesPerEntry measures the Go-heap cost of the memory index.
func TestIndexBytesPerEntry(t *testing.T) {
	const n = 300_000
	c := mustOpen(t, Options{MemBytes: n})
	heap0 := heapAlloc()
	one := []byte{1}
	for i := range n {
		if c.Admit(key(i), one) != Memory {
			t.Fatalf("item %d not admitted", i)
		}
	}
	per := (heapAlloc() - heap0) / n
	t.Logf("memory index: %d heap bytes per entry (1.3M entries: %d MiB)", per, per*1_300_000>>20)
	if per > 100 {
		t.Errorf("%d heap bytes per entry, want <= 100", per)
	}
	runtime.KeepAlive(c)
}
