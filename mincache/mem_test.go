package mincache

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestNoEvictionFirstAdmittedStay(t *testing.T) {
	const size = 10 << 10
	c := mustOpen(t, Options{MemBytes: 10 * size})
	for i := range 25 {
		got := c.Admit(key(i), content(key(i), size))
		want := Memory
		if i >= 10 {
			want = None
		}
		if got != want {
			t.Fatalf("Admit(item %d) = %v, want %v", i, got, want)
		}
	}
	for i := range 25 {
		tier, ok := readFull(t, c, key(i), size)
		if ok != (i < 10) || (ok && tier != Memory) {
			t.Errorf("item %d: ReadAt = %v, %v; want hit only for the first 10", i, tier, ok)
		}
	}
	in := c.Info().Memory
	if in.UsedBytes != 10*size || in.Items != 10 || in.RejectedFull != 15 || in.Admitted != 10 {
		t.Errorf("Info = %+v, want used %d, 10 items, 10 admitted, 15 rejected", in, 10*size)
	}
	// A smaller item that still fits is admitted; the budget is never exceeded.
	c2 := mustOpen(t, Options{MemBytes: 10*size + 100})
	for i := range 11 {
		c2.Admit(key(i), content(key(i), size))
	}
	if got := c2.Admit(key(99), content(key(99), 100)); got != Memory {
		t.Errorf("Admit(small item into remaining room) = %v, want memory", got)
	}
	if got := c2.Admit(key(98), content(key(98), 1)); got != None {
		t.Errorf("Admit(into a full arena) = %v, want none", got)
	}
	if in := c2.Info().Memory; in.UsedBytes != in.BudgetBytes {
		t.Errorf("used %d, budget %d", in.UsedBytes, in.BudgetBytes)
	}
}

// TestEpochsExactAccounting runs 4 epochs of a shuffled dataset through
// "ReadAt else fetch+Admit": from epoch 2 on, the backend serves exactly
// the bytes that were not admitted.
func TestEpochsExactAccounting(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mem, disk  int64
		memOnlyPct int
	}{
		{name: "memory", mem: 1 << 20},
		{name: "memory+disk", mem: 512 << 10, disk: 512 << 10},
		{name: "disk", disk: 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			const items = 200
			sizes := make([]int, items)
			var d int64
			for i := range sizes {
				sizes[i] = 1 + rng.IntN(16<<10)
				d += int64(sizes[i])
			}
			c := mustOpen(t, Options{MemBytes: tc.mem, DiskBytes: tc.disk, Dir: t.TempDir(), Source: "local:/data"})
			var admitted int64
			for epoch := 1; epoch <= 4; epoch++ {
				var backend int64
				for _, i := range rng.Perm(items) {
					k := key(i)
					if _, ok := readFull(t, c, k, sizes[i]); ok {
						continue
					}
					backend += int64(sizes[i])
					if c.Admit(k, content(k, sizes[i])) != None {
						if epoch > 1 {
							t.Fatalf("epoch %d: item %d admitted after the first epoch", epoch, i)
						}
						admitted += int64(sizes[i])
					}
				}
				if epoch == 1 {
					if backend != d {
						t.Fatalf("epoch 1 backend bytes %d, want %d", backend, d)
					}
					if admitted == 0 || admitted == d {
						t.Fatalf("admitted %d of %d: test does not exercise a partial cache", admitted, d)
					}
					continue
				}
				if backend != d-admitted {
					t.Errorf("epoch %d: backend bytes %d, want D - admitted = %d", epoch, backend, d-admitted)
				}
			}
			in := c.Info()
			if got := in.Memory.HitBytes + in.Disk.HitBytes; got != 3*admitted {
				t.Errorf("hit bytes %d, want 3 x admitted = %d", got, 3*admitted)
			}
			if in.Memory.UsedBytes > tc.mem || in.Disk.UsedBytes > tc.disk {
				t.Errorf("over budget: %+v", in)
			}
		})
	}
}

func TestVersionChangeInvalidatesMemory(t *testing.T) {
	c := mustOpen(t, Options{MemBytes: 1 << 20})
	k1 := Key{Path: "a.jpg", Version: "etag-1"}
	k2 := Key{Path: "a.jpg", Version: "etag-2"}
	c.Admit(k1, content(k1, 1000))
	if _, ok := readFull(t, c, k2, 1000); ok {
		t.Fatal("ReadAt with a new version hit the old entry")
	}
	if size, tier := c.Lookup(k1); tier != None || size != 0 {
		t.Errorf("old entry still present after invalidation: %d %v", size, tier)
	}
	in := c.Info().Memory
	if in.Invalidated != 1 || in.Items != 0 || in.LostBytes != 1000 {
		t.Errorf("Info = %+v, want 1 invalidated, 0 items, 1000 lost", in)
	}
	if got := c.Admit(k2, content(k2, 1000)); got != Memory {
		t.Fatalf("Admit(new version) = %v", got)
	}
	if tier, ok := readFull(t, c, k2, 1000); !ok || tier != Memory {
		t.Errorf("new version: %v %v", tier, ok)
	}
	// Admitting an old version back replaces the newer one (the caller's
	// version is authoritative) and is stored once.
	if got := c.Admit(k2, content(k2, 1000)); got != Memory {
		t.Errorf("second Admit = %v", got)
	}
	if in := c.Info().Memory; in.Items != 1 || in.UsedBytes != 2000 {
		t.Errorf("after re-admit: %+v", in)
	}
}

func TestReadAtRanges(t *testing.T) {
	c := mustOpen(t, Options{MemBytes: 1 << 20})
	k := key(1)
	c.Admit(k, content(k, 5000))
	for _, tc := range []struct {
		off   int64
		len   int
		wantN int
		ok    bool
	}{
		{0, 5000, 5000, true},
		{0, 8000, 5000, true},
		{4000, 100, 100, true},
		{4990, 100, 10, true},
		{5000, 100, 0, true},
		{6000, 100, 0, true},
		{-1, 100, 0, false},
	} {
		buf := make([]byte, tc.len)
		n, _, ok := c.ReadAt(k, buf, tc.off)
		if n != tc.wantN || ok != tc.ok {
			t.Errorf("ReadAt(off %d, len %d) = %d, %v; want %d, %v", tc.off, tc.len, n, ok, tc.wantN, tc.ok)
			continue
		}
		checkBytes(t, k, buf[:n], tc.off)
	}
	// Zero-length items are items too.
	e := key(2)
	if got := c.Admit(e, nil); got != Memory {
		t.Errorf("Admit(empty) = %v", got)
	}
	if n, tier, ok := c.ReadAt(e, make([]byte, 10), 0); n != 0 || !ok || tier != Memory {
		t.Errorf("ReadAt(empty) = %d %v %v", n, tier, ok)
	}
}

// TestConcurrentAdmitRead: 32 goroutines admit and read the same and
// different keys; every hit returns the right bytes and each key is stored
// once.
func TestConcurrentAdmitRead(t *testing.T) {
	const (
		workers = 32
		keys    = 64
		size    = 3000
	)
	c := mustOpen(t, Options{MemBytes: keys / 2 * size, DiskBytes: 1 << 20, Dir: t.TempDir(), Source: "s"})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			buf := make([]byte, size)
			for range 150 {
				i := rng.IntN(keys)
				if w%2 == 0 {
					i = rng.IntN(4) // hot keys shared by half the workers
				}
				k := key(i)
				n, _, ok := c.ReadAt(k, buf, 0)
				if ok {
					if n != size {
						t.Errorf("n = %d", n)
						return
					}
					checkBytes(t, k, buf, 0)
					continue
				}
				c.Admit(k, content(k, size))
			}
		})
	}
	wg.Wait()
	in := c.Info()
	if in.Memory.Items+in.Disk.Items != keys {
		t.Errorf("items %d + %d, want %d (each key stored once)", in.Memory.Items, in.Disk.Items, keys)
	}
	if in.Memory.UsedBytes != in.Memory.Items*size || in.Memory.LostBytes != 0 {
		t.Errorf("memory used %d for %d items, lost %d", in.Memory.UsedBytes, in.Memory.Items, in.Memory.LostBytes)
	}
	if in.Memory.Items != keys/2 {
		t.Errorf("memory items %d, want %d (full)", in.Memory.Items, keys/2)
	}
}

// TestDropUnderReaders: readers racing Drop get misses or right bytes.
func TestDropUnderReaders(t *testing.T) {
	const size = 20000
	c := mustOpen(t, Options{MemBytes: 40 * size, DiskBytes: 40 * (size + 1024), Dir: t.TempDir(), Source: "s"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			buf := make([]byte, size)
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				k := key((w*13 + j) % 60)
				if n, _, ok := c.ReadAt(k, buf, 0); ok {
					checkBytes(t, k, buf[:n], 0)
				} else {
					c.Admit(k, content(k, size))
				}
			}
		})
	}
	for range 20 {
		if err := c.Drop(); err != nil {
			t.Fatalf("Drop: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if err := c.Drop(); err != nil {
		t.Fatal(err)
	}
	in := c.Info()
	if in.Memory.Items != 0 || in.Memory.UsedBytes != 0 || in.Disk.Items != 0 || in.Disk.UsedBytes != 0 {
		t.Errorf("after Drop: %+v", in)
	}
	if _, ok := readFull(t, c, key(1), size); ok {
		t.Error("hit after Drop")
	}
	if got := c.Admit(key(1), content(key(1), size)); got != Memory {
		t.Errorf("Admit after Drop = %v", got)
	}
}

func TestClosedCacheMisses(t *testing.T) {
	c := mustOpen(t, Options{MemBytes: 1 << 20, DiskBytes: 1 << 20, Dir: t.TempDir()})
	c.Admit(key(1), content(key(1), 100))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := readFull(t, c, key(1), 100); ok {
		t.Error("hit after Close")
	}
	if got := c.Admit(key(2), content(key(2), 100)); got != None {
		t.Errorf("Admit after Close = %v", got)
	}
}

func TestOpenValidates(t *testing.T) {
	for _, o := range []Options{{MemBytes: -1}, {DiskBytes: -1, Dir: "x"}, {DiskBytes: 1}} {
		if c, err := Open(o); err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	c := mustOpen(t, Options{})
	if got := c.Admit(key(1), []byte("x")); got != None {
		t.Errorf("zero Options: Admit = %v", got)
	}
}
