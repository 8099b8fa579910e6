package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The kernel-cache hit path keeps the MinIO guarantee through the real
// binary: with a memory tier of half the dataset, epoch 2 (another random
// order) reads exactly D - cached from the backend, counted below the read
// path by the throttle wrapper (independently of stallfs's own counters,
// which agree), and a re-read of each file afterwards goes to the backend
// for exactly the files the tier does not hold: the kernel kept no page of
// them, whatever it kept of the others.
func TestE2EKernelCacheExactBackendBytes(t *testing.T) {
	d := newCacheDataset(t, 120)
	budget := d.bytes / 2
	addr := freePort(t)
	m := mountCacheDaemon(t, d.src, "--kernel-cache", "--cache-mem", strconv.FormatInt(budget, 10),
		"--backend-bandwidth", "10GB/s", "--metrics-addr", addr)
	backend := func() int64 { return int64(scrape(t, addr)["stallfs_throttle_read_bytes_total"]) }

	readEpoch(t, m, d, epochOrder(d.files, 1))
	if got := backend(); got != d.bytes {
		t.Fatalf("epoch 1: %d backend bytes, want D = %d", got, d.bytes)
	}
	in1 := m.cacheInfo(t)
	cached := in1.Memory.UsedBytes
	if cached <= 0 || cached > budget {
		t.Fatalf("after epoch 1 the memory tier holds %d bytes of a %d budget", cached, budget)
	}
	b1, s1 := backend(), m.statsBackend(t)
	readEpoch(t, m, d, epochOrder(d.files, 2))
	want := d.bytes - cached
	if got := backend() - b1; got != want {
		t.Errorf("epoch 2: %d backend bytes (throttle counter), want D - cached = %d", got, want)
	}
	if got := m.statsBackend(t) - s1; got != want {
		t.Errorf("epoch 2: stallfs stats count %d backend bytes, want D - cached = %d", got, want)
	}
	in2 := m.cacheInfo(t)
	if in2.Memory.UsedBytes != cached || in2.Memory.Items != in1.Memory.Items {
		t.Errorf("epoch 2 changed the memory tier: %d items, %d bytes; was %d, %d", in2.Memory.Items, in2.Memory.UsedBytes, in1.Memory.Items, cached)
	}
	// Hits that reached the daemon: the kernel served the rest itself.
	t.Logf("epoch 2: %d of %d cached bytes read from the memory tier, the rest from kept pages", in2.Memory.HitBytes-in1.Memory.HitBytes, cached)

	// Each file alone: a file costs its size or nothing, and the ones that
	// cost it add up to what the tier does not hold.
	var sum int64
	var again, kept int
	for _, p := range d.files {
		before := backend()
		got, err := os.ReadFile(filepath.Join(m.mnt, filepath.FromSlash(p)))
		if err != nil || int64(len(got)) != d.sizes[p] {
			t.Fatalf("re-read %s: %d bytes, %v; want %d", p, len(got), err, d.sizes[p])
		}
		switch delta := backend() - before; delta {
		case 0:
			kept++
		case d.sizes[p]:
			again++
			sum += delta
		default:
			t.Errorf("re-read %s: %d backend bytes, want 0 (cached) or its size %d", p, delta, d.sizes[p])
		}
	}
	if sum != want || again == 0 || kept == 0 {
		t.Errorf("re-reads: %d files from the backend (%d bytes), %d not; want D - cached = %d bytes", again, sum, kept, want)
	}

	// Writes are refused although the kernel sends no OPEN.
	if err := os.WriteFile(filepath.Join(m.mnt, filepath.FromSlash(d.files[0])), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write through the mount: %v, want EROFS", err)
	}

	// cache drop: every file comes from the backend again.
	if code, out, stderr := stallfsCmd(t, "cache", "drop", m.mnt); code != 0 {
		t.Fatalf("stallfs cache drop: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	b3 := backend()
	readEpoch(t, m, d, epochOrder(d.files, 3))
	if got := backend() - b3; got != d.bytes {
		t.Errorf("epoch after cache drop: %d backend bytes, want D = %d", got, d.bytes)
	}
}
