package fs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// countObserver counts Observe calls.
type countObserver struct{ n atomic.Int64 }

func (o *countObserver) Observe(string) { o.n.Add(1) }

// kcDataset writes n pattern files (seed = index + 1) of 8-60 KB below a
// new directory and returns it, the relative paths and their sizes.
func kcDataset(t *testing.T, n int) (string, []string, map[string]int64, int64) {
	t.Helper()
	src := t.TempDir()
	var paths []string
	sizes := map[string]int64{}
	var total int64
	for i := range n {
		p := fmt.Sprintf("c%d/%03d.jpg", i%3, i)
		size := int64(8192 + (i*7919)%52000)
		writePat(t, filepath.Join(src, p), int64(i+1), size)
		paths = append(paths, p)
		sizes[p] = size
		total += size
	}
	return src, paths, sizes, total
}

// kcMount mounts src in kernel-cache mode with a memory tier of budget
// bytes and returns the mount, its mountpoint, the cache, the backend
// counter and the recorder.
func kcMount(t *testing.T, src string, budget int64, opts Options) (*Mount, string, *mincache.Cache, *countingBackend, *recorder) {
	t.Helper()
	c, err := mincache.Open(mincache.Options{MemBytes: budget, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := &countingBackend{dirBackend: dirBackend{root: src}}
	rec := &recorder{}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.KernelCache = true
	opts.Cache = c
	opts.Recorder = rec
	opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	m, err := New(t.Context(), mnt, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return m, mnt, c, b, rec
}

// readAllKC reads every path once through mnt with 4 readers, in a
// seeded random order, checking every byte.
func readAllKC(t *testing.T, mnt string, paths []string, seed uint64) {
	t.Helper()
	order := append([]string(nil), paths...)
	rand.New(rand.NewPCG(seed, 9)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	next := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for p := range next {
				checkKCFile(t, mnt, p)
			}
		})
	}
	for _, p := range order {
		next <- p
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func checkKCFile(t *testing.T, mnt, p string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(mnt, p))
	if err != nil {
		t.Errorf("read %s: %v", p, err)
		return
	}
	var i int
	if _, err := fmt.Sscanf(filepath.Base(p), "%03d.jpg", &i); err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	want := make([]byte, len(got))
	fillPat(want, int64(i+1), 0)
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes differ from the source", p, len(got))
	}
}

func (r *recorder) snapshot() (b [4]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Two epochs through a kernel-cache mount whose tier holds about half the
// dataset: epoch 2 reads exactly D - cached from the backend (the kernel
// kept no page of a non-tier file), the stats count the tier's bytes at
// LOOKUP, a re-read of an uncached file goes to the backend again and of a
// cached one does not, and a cache drop sends every file to the backend.
func TestKernelCacheEpochsExactBackendBytes(t *testing.T) {
	src, paths, sizes, total := kcDataset(t, 60)
	obs := &countObserver{}
	m, mnt, c, b, rec := kcMount(t, src, total/2, Options{BeforeMount: func(m *Mount) error { m.SetObserver(obs); return nil }})

	readAllKC(t, mnt, paths, 1)
	if m.kc.mode.Load() != kcNoOpen {
		t.Fatalf("kernel-cache mode %d, want no-open (%d): this kernel supports zero-message opens", m.kc.mode.Load(), kcNoOpen)
	}
	if got := b.bytes.Load(); got != total {
		t.Fatalf("epoch 1: %d backend bytes, want D = %d", got, total)
	}
	cached := c.Info().Memory.UsedBytes
	if cached <= 0 || cached >= total {
		t.Fatalf("tier holds %d of %d bytes; want some but not all", cached, total)
	}
	// Opens are LOOKUPs: one Observe per file read (the first one opened
	// before INIT was known may have been an OPEN instead).
	if n := obs.n.Load(); n < int64(len(paths))-1 || n > int64(len(paths)) {
		t.Errorf("epoch 1: %d Observe calls, want one per file (%d)", n, len(paths))
	}
	b0, r0 := b.bytes.Load(), rec.snapshot()
	readAllKC(t, mnt, paths, 2)
	if got := b.bytes.Load() - b0; got != total-cached {
		t.Errorf("epoch 2: %d backend bytes, want D - cached = %d", got, total-cached)
	}
	r1 := rec.snapshot()
	if got := r1[stats.Backend] - r0[stats.Backend]; got != total-cached {
		t.Errorf("epoch 2: recorded %d backend bytes, want %d", got, total-cached)
	}
	if got := r1[stats.Memory] - r0[stats.Memory]; got != cached {
		t.Errorf("epoch 2: recorded %d memory bytes (at LOOKUP), want the %d cached", got, cached)
	}
	if m.kc.notifies.Load() == 0 {
		t.Error("no page invalidation was sent")
	}

	// Re-reads: an uncached file costs its size again, a cached one nothing.
	var inTier, notInTier string
	for _, p := range paths {
		_, _, whole := m.rd.tierBytes(&m.newFileNode(mustID(t, m, p)).ref)
		if whole && inTier == "" {
			inTier = p
		}
		if !whole && notInTier == "" {
			notInTier = p
		}
	}
	for _, c := range []struct {
		p    string
		want int64
	}{{notInTier, sizes[notInTier]}, {inTier, 0}, {notInTier, sizes[notInTier]}} {
		before := b.bytes.Load()
		checkKCFile(t, mnt, c.p)
		if got := b.bytes.Load() - before; got != c.want {
			t.Errorf("re-read %s: %d backend bytes, want %d", c.p, got, c.want)
		}
	}

	// Drop the tier behind the mount's back: the next open of a file whose
	// pages the kernel kept finds the tier without it and drops them.
	if err := c.Drop(); err != nil {
		t.Fatal(err)
	}
	before := b.bytes.Load()
	checkKCFile(t, mnt, inTier)
	if got := b.bytes.Load() - before; got != sizes[inTier] {
		t.Errorf("after cache drop, read %s: %d backend bytes, want %d", inTier, got, sizes[inTier])
	}
	// DropKernelCache drops the rest at once; a full epoch reads D.
	m.DropKernelCache()
	if err := c.Drop(); err != nil { // what the epoch above admitted
		t.Fatal(err)
	}
	m.DropKernelCache()
	before = b.bytes.Load()
	readAllKC(t, mnt, paths, 3)
	if got := b.bytes.Load() - before; got != total {
		t.Errorf("epoch after drop: %d backend bytes, want D = %d", got, total)
	}
}

func mustID(t *testing.T, m *Mount, p string) uint32 {
	t.Helper()
	id, ok := m.FileID(p)
	if !ok {
		t.Fatalf("no file %s", p)
	}
	return id
}

// Pages of a non-tier file leave the page cache once more than the budget
// of such pages was read after them; pages of a tier file stay. Checked
// with mincore on a mapping of a descriptor opened before (an open would
// send a LOOKUP, which drops the pages itself).
func TestKernelCacheBudgetDropsNonTierPages(t *testing.T) {
	src, paths, sizes, _ := kcDataset(t, 8)
	tierFile, other := paths[0], paths[1:]
	m, mnt, _, _, _ := kcMount(t, src, sizes[tierFile], Options{BufferBytes: sizes[paths[1]] + 1})
	open := func(p string) *os.File {
		f, err := os.Open(filepath.Join(mnt, p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.ReadAt(make([]byte, sizes[p]), 0); err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		return f
	}
	tf := open(tierFile) // admitted: the tier's budget is its size
	first := open(other[0])
	if !resident(t, first, sizes[other[0]]) || !resident(t, tf, sizes[tierFile]) {
		t.Fatal("pages of files just read are not in the page cache")
	}
	for _, p := range other[1:] { // over the budget: the oldest pages go
		open(p)
	}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for resident(t, first, sizes[other[0]]) {
		select {
		case <-deadline:
			t.Fatalf("pages of non-tier %s still cached after %d notifications", other[0], m.kc.notifies.Load())
		case <-tick.C:
		}
	}
	if !resident(t, tf, sizes[tierFile]) {
		t.Error("pages of the tier's file were dropped")
	}
}

// resident reports whether every page of f's first size bytes is in the
// page cache.
func resident(t *testing.T, f *os.File, size int64) bool {
	t.Helper()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", f.Name(), err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (size+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore %s: %v", f.Name(), errno)
	}
	for _, v := range vec {
		if v&1 == 0 {
			return false
		}
	}
	return true
}

// A large file read sequentially without a handle (the kernel's own
// readahead, none of the daemon's): every byte right, each chunk fetched
// once.
func TestKernelCacheLargeFile(t *testing.T) {
	src := t.TempDir()
	const size = 3<<20 + 12345
	writePat(t, filepath.Join(src, "big"), 7, size)
	_, mnt, _, b, _ := kcMount(t, src, 0, Options{ChunkSize: 256 << 10})
	got, err := os.ReadFile(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size {
		t.Fatalf("read %d bytes, want %d", len(got), size)
	}
	checkPat(t, "big", got, 7, 0)
	if n := b.bytes.Load(); n != size {
		t.Errorf("backend bytes %d, want each chunk once (%d)", n, size)
	}
}

// Writes are refused with EROFS also when OPEN is not sent, and closing
// works without FLUSH.
func TestKernelCacheReadOnly(t *testing.T) {
	src, paths, _, _ := kcDataset(t, 2)
	m, mnt, _, _, _ := kcMount(t, src, 1<<20, Options{})
	checkKCFile(t, mnt, paths[0]) // the first open: OPEN answered ENOSYS
	if !m.kc.noOpen() {
		t.Fatal("not in no-open mode")
	}
	f := filepath.Join(mnt, paths[1])
	for _, c := range []struct {
		name string
		err  error
	}{
		{"open O_WRONLY", openErr(f, os.O_WRONLY)},
		{"open O_RDWR", openErr(f, os.O_RDWR)},
		{"open O_TRUNC", openErr(f, os.O_RDONLY|os.O_TRUNC)},
		{"truncate", os.Truncate(f, 0)},
		{"creat", openErr(filepath.Join(mnt, "new"), os.O_CREATE|os.O_WRONLY)},
	} {
		if !errors.Is(c.err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", c.name, c.err)
		}
	}
	checkKCFile(t, mnt, paths[1])
}
