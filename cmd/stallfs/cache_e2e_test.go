package main

// End-to-end tests of the MinIO cache through the real binary: a daemon
// mount of a local source, epochs in fresh random orders, every byte
// checked, and the backend bytes counted independently of stallfs's own
// counters, from the daemon's /proc/PID/io. rchar there counts every byte
// the daemon read with read(2)/pread(2): the local backend's preads, the
// disk tier's entry reads, and the FUSE requests it reads from /dev/fuse.
// The last are the same in every epoch that reads the same files the same
// way, so a calibration mount whose memory tier holds everything measures
// them: its epoch 2 reads nothing from the backend (rchar = the requests
// alone), and its epoch 1 reads exactly D more. The names are looked up
// (stat) before each epoch's window, so that the LOOKUPs of a first epoch,
// whose count depends on how concurrent readers race, are not in it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// cacheDataset is a flat-ish tree of small files (each one item and one
// FUSE READ), with a deterministic pattern by offset.
type cacheDataset struct {
	src   string
	files []string // relative paths
	sizes map[string]int64
	bytes int64 // D
}

func newCacheDataset(t *testing.T, n int) *cacheDataset {
	t.Helper()
	d := &cacheDataset{src: filepath.Join(t.TempDir(), "src"), sizes: map[string]int64{}}
	for i := range n {
		p := fmt.Sprintf("train/c%d/%04d.JPEG", i%4, i)
		size := 8192 + (i*7919)%56000
		writeTestFile(t, d.src, p, pattern(p, size))
		d.files = append(d.files, p)
		d.sizes[p] = int64(size)
		d.bytes += int64(size)
	}
	return d
}

// daemonMount is a `stallfs mount --daemon` of a cacheDataset.
type daemonMount struct {
	mnt string
	pid int
}

// mountCacheDaemon mounts src on a new mountpoint with the given flags and
// unmounts it (or kills it) at cleanup.
func mountCacheDaemon(t *testing.T, src string, flags ...string) *daemonMount {
	t.Helper()
	// The Go runtime of the daemon re-reads its cgroup's CPU limit every
	// second (a few bytes of rchar each time) unless told not to.
	t.Setenv("GODEBUG", "updatemaxprocs=0")
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &daemonMount{mnt: mnt, pid: mountDaemon(t, src, mnt, flags...)}
	t.Cleanup(func() { m.unmount(t) })
	return m
}

// unmount unmounts m (a no-op when it is gone already) and waits for the
// daemon to exit, so that its cache is closed.
func (m *daemonMount) unmount(t *testing.T) {
	t.Helper()
	if !isMounted(m.mnt) {
		return
	}
	if code, _, stderr := stallfsCmd(t, "unmount", m.mnt); code != 0 {
		_ = syscall.Kill(m.pid, syscall.SIGKILL)
		_ = unmountPath(m.mnt, true)
		t.Errorf("stallfs unmount %s: exit %d, %s", m.mnt, code, stderr)
	}
}

// get decodes GET path of the mount's control socket into v.
func (m *daemonMount) get(t *testing.T, path string, v any) {
	t.Helper()
	sock, err := fs.ControlSocketPath(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	c := statsClient(sock)
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://stallfs"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// cacheInfo is the mount's cache fill (GET /v1/cache).
func (m *daemonMount) cacheInfo(t *testing.T) mincache.Info {
	t.Helper()
	var ci cacheInfo
	m.get(t, "/v1/cache", &ci)
	if !ci.Enabled || ci.Info == nil {
		t.Fatalf("cache info of %s: no cache", m.mnt)
	}
	return *ci.Info
}

// statsBackend is stallfs's own count of bytes served from the backend.
func (m *daemonMount) statsBackend(t *testing.T) int64 {
	t.Helper()
	var s stats.Snapshot
	m.get(t, "/v1/stats", &s)
	return s.Totals.BytesBySource.Backend
}

// epochOrder is the order of epoch e: a fresh seeded permutation.
func epochOrder(files []string, e uint64) []string {
	order := slices.Clone(files)
	r := rand.New(rand.NewPCG(42, e))
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// readEpoch reads every file of d once through m, in order, with 4
// readers taking the next file in turn, and checks every byte. It returns
// the daemon's rchar delta over the reads.
func readEpoch(t *testing.T, m *daemonMount, d *cacheDataset, order []string) int64 {
	t.Helper()
	for _, p := range d.files { // LOOKUPs and GETATTRs, before the window
		if st, err := os.Stat(filepath.Join(m.mnt, filepath.FromSlash(p))); err != nil || st.Size() != d.sizes[p] {
			t.Fatalf("stat %s: %v, %v; want size %d", p, st, err, d.sizes[p])
		}
	}
	before := procRchar(t, m.pid)
	next := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for p := range next {
				got, err := os.ReadFile(filepath.Join(m.mnt, filepath.FromSlash(p)))
				if err != nil {
					t.Errorf("read %s: %v", p, err)
					continue
				}
				if int64(len(got)) != d.sizes[p] || !bytes.Equal(got, pattern(p, len(got))) {
					t.Errorf("%s: %d bytes read differ from the source (%d bytes)", p, len(got), d.sizes[p])
				}
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
	m.drainRequests(t)
	return procRchar(t, m.pid) - before
}

// drainRequests returns once the daemon has read every FUSE request queued
// so far. The kernel sends RELEASE in the background (close does not wait
// for it); a STATFS, answered synchronously, is queued behind it and
// read after it.
func (m *daemonMount) drainRequests(t *testing.T) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.mnt, &st); err != nil {
		t.Fatal(err)
	}
}

// rcharJitter bounds the FUSE request bytes that vary from one epoch to
// the next: FORGET/BATCH_FORGET requests (48 + 16 bytes an inode) come when
// the kernel evicts inodes (memory pressure, drop_caches by anyone on the
// host), and counts a few bytes apart have been seen without them. It is
// half the smallest item (8 KiB), so a backend count within it of the
// expected one is exact in items: one item more or less is always caught.
// stallfs's own count is compared exactly.
const rcharJitter = 4096

func abs(x int64) int64 { return max(x, -x) }

// checkBackendBytes compares backend bytes counted from rchar with want.
func checkBackendBytes(t *testing.T, what string, got, want int64) {
	t.Helper()
	if abs(got-want) > rcharJitter {
		t.Errorf("%s: backend bytes from /proc rchar %d, want %d (diff %d)", what, got, want, got-want)
	}
}

// calibrate measures the bytes of the FUSE requests that the daemon reads
// in one readEpoch over d, with a memory tier that holds everything.
func calibrate(t *testing.T, d *cacheDataset) int64 {
	t.Helper()
	m := mountCacheDaemon(t, d.src, "--cache-mem", strconv.FormatInt(2*d.bytes+1<<20, 10))
	e1 := readEpoch(t, m, d, epochOrder(d.files, 1))
	e2 := readEpoch(t, m, d, epochOrder(d.files, 2))
	if in := m.cacheInfo(t); in.Memory.Items != int64(len(d.files)) || in.Memory.UsedBytes != d.bytes {
		t.Fatalf("calibration mount holds %d items, %d bytes; want all %d, %d", in.Memory.Items, in.Memory.UsedBytes, len(d.files), d.bytes)
	}
	// A wrong premise fails here rather than later: the same requests in
	// both epochs (within the jitter), a few hundred bytes per file.
	if n := int64(len(d.files)); abs(e1-d.bytes-e2) > rcharJitter || e2 <= 0 || e2 > n*1024 {
		t.Fatalf("FUSE request bytes: epoch 1 %d (rchar %d - D), epoch 2 %d, for %d files; want equal (+-%d), > 0, <= 1 KiB a file",
			e1-d.bytes, e1, e2, n, rcharJitter)
	}
	m.unmount(t)
	return e2
}

func TestE2ECacheMemoryTierExactBackendBytes(t *testing.T) {
	d := newCacheDataset(t, 120)
	fuse := calibrate(t, d)
	budget := d.bytes / 2
	m := mountCacheDaemon(t, d.src, "--cache-mem", strconv.FormatInt(budget, 10))

	o1, o2 := epochOrder(d.files, 1), epochOrder(d.files, 2)
	if slices.Equal(o1, o2) {
		t.Fatal("epochs 1 and 2 have the same order")
	}
	checkBackendBytes(t, "epoch 1", readEpoch(t, m, d, o1)-fuse, d.bytes)
	in1 := m.cacheInfo(t)
	cached := in1.Memory.UsedBytes
	if cached <= 0 || cached > budget || in1.Memory.LostBytes != 0 {
		t.Fatalf("after epoch 1 the memory tier holds %d bytes (lost %d) of a %d budget", cached, in1.Memory.LostBytes, budget)
	}
	// Every item was offered to the tier in epoch 1: admitted, or rejected
	// because it did not fit in what was left.
	if in1.Memory.RejectedFull == 0 || in1.Memory.Items+in1.Memory.RejectedFull < int64(len(d.files)) {
		t.Errorf("memory tier: %d items, %d rejected; want every one of %d files offered and some rejected", in1.Memory.Items, in1.Memory.RejectedFull, len(d.files))
	}
	stats1 := m.statsBackend(t)

	want := d.bytes - cached
	checkBackendBytes(t, "epoch 2 (D - cached)", readEpoch(t, m, d, o2)-fuse, want)
	if own := m.statsBackend(t) - stats1; own != want {
		t.Errorf("epoch 2: stallfs stats count %d backend bytes, want D - cached = %d", own, want)
	}
	in2 := m.cacheInfo(t)
	if in2.Memory.UsedBytes != cached || in2.Memory.Items != in1.Memory.Items {
		t.Errorf("epoch 2 changed the memory tier: %d items, %d bytes; was %d, %d (no eviction, no admission when full)",
			in2.Memory.Items, in2.Memory.UsedBytes, in1.Memory.Items, cached)
	}
	if hits := in2.Memory.HitBytes - in1.Memory.HitBytes; hits != cached {
		t.Errorf("epoch 2: %d bytes of memory hits, want all %d cached bytes", hits, cached)
	}
	// The CLI shows the same fill.
	code, out, stderr := stallfsCmd(t, "cache", "info", m.mnt)
	if code != 0 || !strings.Contains(out, "memory") || !strings.Contains(out, strconv.FormatInt(in2.Memory.Items, 10)) {
		t.Errorf("stallfs cache info: exit %d, stdout %q, stderr %q; want the memory tier with %d items", code, out, stderr, in2.Memory.Items)
	}
}

func TestE2ECacheDiskTierRemountAndDrop(t *testing.T) {
	d := newCacheDataset(t, 120)
	fuse := calibrate(t, d)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	flags := []string{"--cache-mem", "0", "--cache-dir", cacheDir, "--cache-disk", strconv.FormatInt(d.bytes/2, 10)}

	m := mountCacheDaemon(t, d.src, flags...)
	// Writing entries reads nothing: rchar counts the backend's D only.
	checkBackendBytes(t, "first epoch", readEpoch(t, m, d, epochOrder(d.files, 1))-fuse, d.bytes)
	in := m.cacheInfo(t)
	if in.Disk.Items == 0 || in.Disk.RejectedFull == 0 || in.Disk.UsedBytes > d.bytes/2 {
		t.Fatalf("disk tier after epoch 1: %d items, %d rejected, %d of %d bytes", in.Disk.Items, in.Disk.RejectedFull, in.Disk.UsedBytes, d.bytes/2)
	}
	items := in.Disk.Items
	m.unmount(t)

	// A second mount of the same source and cache dir is refused while the
	// first holds it.
	m = mountCacheDaemon(t, d.src, flags...)
	t.Run("same source, same cache dir", func(t *testing.T) {
		mnt2 := filepath.Join(t.TempDir(), "mnt2")
		if err := os.Mkdir(mnt2, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if isMounted(mnt2) {
				_, _, _ = stallfsCmd(t, "unmount", mnt2)
			}
		})
		// --daemon: a wrong success returns too, instead of serving forever.
		args := append(append([]string{"mount", "--daemon"}, flags...), d.src, mnt2)
		code, _, stderr := stallfsCmd(t, args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, mincache.ErrLocked.Error()) || !strings.Contains(stderr, cacheDir) {
			t.Errorf("second mount: exit %d, stderr %q; want 2 and one line naming the cache dir and %q", code, stderr, mincache.ErrLocked)
		}
		if isMounted(mnt2) {
			t.Error("second mount is mounted")
		}
	})

	// The remount is warm at once: the index is loaded, no entry read.
	in = m.cacheInfo(t)
	if in.Disk.Items != items || in.Disk.ReadBytes != 0 {
		t.Fatalf("after remount: %d disk items, %d entry bytes read; want %d, 0", in.Disk.Items, in.Disk.ReadBytes, items)
	}
	stats0 := m.statsBackend(t)
	rc := readEpoch(t, m, d, epochOrder(d.files, 3))
	in2 := m.cacheInfo(t)
	cached := in2.Disk.HitBytes // data bytes of the entries, every one hit once
	if in2.Disk.Hits != items || in2.Disk.Corrupt != 0 {
		t.Errorf("epoch after remount: %d disk hits (%d corrupt), want one per entry (%d)", in2.Disk.Hits, in2.Disk.Corrupt, items)
	}
	// rchar = backend preads + disk entry reads + FUSE requests.
	want := d.bytes - cached
	checkBackendBytes(t, "epoch after remount (D - cached, rchar - entry reads)", rc-fuse-in2.Disk.ReadBytes, want)
	if own := m.statsBackend(t) - stats0; own != want {
		t.Errorf("epoch after remount: stallfs stats count %d backend bytes, want D - cached = %d", own, want)
	}
	if in2.Disk.ReadBytes < cached || in2.Disk.ReadBytes > in2.Disk.UsedBytes {
		t.Errorf("entry bytes read %d, want between the data (%d) and the entry files (%d)", in2.Disk.ReadBytes, cached, in2.Disk.UsedBytes)
	}

	// cache drop empties the tier; the next epoch reads D from the backend.
	if code, out, stderr := stallfsCmd(t, "cache", "drop", m.mnt); code != 0 {
		t.Fatalf("stallfs cache drop: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	in3 := m.cacheInfo(t)
	if in3.Disk.Items != 0 || in3.Disk.UsedBytes != 0 {
		t.Fatalf("after cache drop: %d disk items, %d bytes; want 0", in3.Disk.Items, in3.Disk.UsedBytes)
	}
	entries, err := filepath.Glob(filepath.Join(in3.Dir, "data", "*", "*"))
	if err != nil || len(entries) != 0 {
		t.Errorf("after cache drop: %d entry files left under %s (%v)", len(entries), in3.Dir, err)
	}
	rc = readEpoch(t, m, d, epochOrder(d.files, 4))
	in4 := m.cacheInfo(t)
	checkBackendBytes(t, "epoch after drop", rc-fuse-(in4.Disk.ReadBytes-in3.Disk.ReadBytes), d.bytes)
}

// 64 readers of one uncached file, released together while the backend
// answers slowly (500 ms before the first byte), cause one backend read of
// it: the readers inside that window share the fetch (64 separate fetches
// would all start before the first one ends), and any reader slower than
// that finds the item in the memory tier the fetch filled. (With no tier
// at all, a reader arriving after the fetched bytes were read through
// once fetches again, by design.)
func TestE2ECacheConcurrentReadersOneBackendRead(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	const p, size = "one.JPEG", 100_000
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, p), pattern(p, size), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountCacheDaemon(t, src, "--cache-mem", "1MiB", "--backend-latency", "500ms")
	const readers = 64
	fds := make([]*os.File, readers)
	for i := range fds {
		f, err := os.Open(filepath.Join(m.mnt, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds[i] = f
	}
	before := procRchar(t, m.pid)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range fds {
		wg.Go(func() {
			<-start
			buf := make([]byte, size)
			n, err := f.ReadAt(buf, 0)
			if err != nil || !bytes.Equal(buf[:n], pattern(p, size)) {
				t.Errorf("read %s: %d bytes, %v; want the %d source bytes", p, n, err, size)
			}
		})
	}
	close(start)
	wg.Wait()
	m.drainRequests(t)
	// One READ request per reader (<= 128 bytes each) besides the backend.
	got := procRchar(t, m.pid) - before
	if got < size || got >= size+readers*128 {
		t.Errorf("%d readers: the daemon read %d bytes; want one backend read of %d (+ < %d of FUSE requests)", readers, got, size, readers*128)
	}
}
