package main

// Hard-fault tests through the real binary (docs/reliability.md lists
// them): the daemon killed during reads, torn and bit-flipped cache entry
// files, a full cache disk, the cache directory removed under the daemon,
// a backend that stalls for seconds, and a source file replaced while it
// is read. Every byte a reader gets is compared with the source; a fault
// may cost an error or a backend fetch, never a wrong byte.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/mincache"
)

// fltData is a small tree with a deterministic pattern by offset.
type fltData struct {
	src   string
	files []string
	sizes map[string]int
	bytes int64
}

func newFltData(t *testing.T, n, minSize int) *fltData {
	t.Helper()
	d := &fltData{src: filepath.Join(t.TempDir(), "src"), sizes: map[string]int{}}
	for i := range n {
		p := fmt.Sprintf("train/c%d/%04d.JPEG", i%3, i)
		size := minSize + (i*7919)%40000
		writeTestFile(t, d.src, p, pattern(p, size))
		d.files = append(d.files, p)
		d.sizes[p] = size
		d.bytes += int64(size)
	}
	return d
}

// fltMount is a daemon mount; cleanup unmounts it or, failing that, kills
// the daemon and detaches the mountpoint.
type fltMount struct {
	mnt string
	pid int
}

func fltMountDaemon(t *testing.T, src, mnt string, flags ...string) *fltMount {
	t.Helper()
	m := &fltMount{mnt: mnt, pid: mountDaemon(t, src, mnt, flags...)}
	t.Cleanup(func() {
		if isMounted(mnt) {
			if code, _, _ := stallfsCmd(t, "unmount", mnt); code != 0 {
				_ = syscall.Kill(m.pid, syscall.SIGKILL)
				_ = unmountPath(mnt, true)
			}
		}
	})
	return m
}

// cacheInfo runs `stallfs cache info --json`.
func (m *fltMount) cacheInfo(t *testing.T) mincache.Info {
	t.Helper()
	code, stdout, stderr := stallfsCmd(t, "cache", "info", "--json", m.mnt)
	if code != 0 {
		t.Fatalf("cache info: exit %d, %s", code, stderr)
	}
	var ci cacheInfo
	if err := json.Unmarshal([]byte(stdout), &ci); err != nil || ci.Info == nil {
		t.Fatalf("cache info --json: %v, %q", err, stdout)
	}
	return *ci.Info
}

// stats runs `stallfs stats --json`.
func (m *fltMount) stats(t *testing.T) mountStats {
	t.Helper()
	code, stdout, stderr := stallfsCmd(t, "stats", "--json", m.mnt)
	if code != 0 {
		t.Fatalf("stats: exit %d, %s", code, stderr)
	}
	var s mountStats
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stats --json: %v, %q", err, stdout)
	}
	return s
}

// readAll reads every file of d through mnt with 4 readers and checks
// every byte; it returns the first read error (nil: every file read and
// correct). A wrong byte fails the test at once.
func (d *fltData) readAll(t *testing.T, mnt string) error {
	t.Helper()
	next := make(chan string)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for p := range next {
				got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
				if err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					continue
				}
				if len(got) != d.sizes[p] || !bytes.Equal(got, pattern(p, len(got))) {
					t.Errorf("%s: %d bytes read differ from the source (%d bytes)", p, len(got), d.sizes[p])
				}
			}
		})
	}
	for _, p := range d.files {
		next <- p
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// entryFiles lists the disk tier's entry files under dir/<ns>/data.
func entryFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && strings.Contains(filepath.ToSlash(p), "/data/") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SIGKILL in the middle of a cold epoch (entries being written), then
// mount --force: what reached the disk tier is there at once and served
// (no backend read for it, no corrupt entry), the rest comes from the
// backend, and every byte read, before the kill and after, is correct.
func TestFaultSIGKILLRemountDiskWarm(t *testing.T) {
	d := newFltData(t, 80, 20000)
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := testMountpoint(t)
	flags := []string{"--cache-mem", "0", "--cache-disk", "64MiB", "--cache-dir", cache}
	m := fltMountDaemon(t, d.src, mnt, flags...)
	// Readers go through the files once while the daemon dies: reads may
	// fail, but what they return must be right.
	var read sync.WaitGroup
	read.Add(len(d.files) / 2)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(d.files); i += 4 {
				p := d.files[i]
				got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
				if err == nil && !bytes.Equal(got, pattern(p, d.sizes[p])) {
					t.Errorf("%s: wrong bytes while the daemon was killed", p)
				}
				if i < len(d.files)/2 {
					read.Done()
				}
			}
		})
	}
	read.Wait() // the first half was read; the second half is in flight
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(m.pid) && time.Now().Before(deadline) {
		fltPause()
	}

	m2 := fltMountDaemon(t, d.src, mnt, append(flags, "--force")...)
	in := m2.cacheInfo(t)
	warm := in.Disk.Items
	if warm < int64(len(d.files)/2) || in.Disk.Corrupt != 0 {
		t.Errorf("after SIGKILL and remount the disk tier holds %d items (%d corrupt); want at least the %d read before the kill, none corrupt",
			warm, in.Disk.Corrupt, len(d.files)/2)
	}
	rc0 := procRchar(t, m2.pid)
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("epoch after remount: %v", err)
	}
	rc := procRchar(t, m2.pid) - rc0
	st := m2.stats(t)
	in = m2.cacheInfo(t)
	backend := st.Totals.BytesBySource.Backend
	// rchar counts the local backend's reads, the disk tier's entry reads
	// and the FUSE requests (well under 1 KiB a file): without the disk
	// tier's reads it is the backend's bytes plus requests.
	other := rc - in.Disk.ReadBytes - backend
	t.Logf("dataset %d B, %d files; %d items warm after SIGKILL; epoch: backend %d B, disk hits %d (%d B), rchar %d = disk reads %d + backend + %d",
		d.bytes, len(d.files), warm, backend, in.Disk.Hits, in.Disk.HitBytes, rc, in.Disk.ReadBytes, other)
	if backend >= d.bytes || backend+in.Disk.HitBytes != d.bytes || in.Disk.Hits != warm || in.Disk.Corrupt != 0 {
		t.Errorf("epoch after remount: backend %d B + disk hits %d B (%d items, %d corrupt); want the %d warm items from disk, the rest (%d B in all) from the backend",
			backend, in.Disk.HitBytes, in.Disk.Hits, in.Disk.Corrupt, warm, d.bytes)
	}
	if other < 0 || other > int64(len(d.files))*1024 {
		t.Errorf("/proc/%d/io: rchar %d - disk tier reads %d - backend %d = %d; want only FUSE requests (0..%d)",
			m2.pid, rc, in.Disk.ReadBytes, backend, other, len(d.files)*1024)
	}
}

// fltPause waits a millisecond between polls.
func fltPause() { <-time.After(time.Millisecond) }

// Torn writes and flipped bits in entry files between two mounts: no
// corrupt byte is served, and each damaged entry is counted corrupt.
func TestFaultCorruptCacheEntries(t *testing.T) {
	d := newFltData(t, 48, 5000)
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := testMountpoint(t)
	flags := []string{"--cache-mem", "0", "--cache-disk", "64MiB", "--cache-dir", cache}
	m := fltMountDaemon(t, d.src, mnt, flags...)
	if err := d.readAll(t, mnt); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", stderr)
	}
	_ = m
	entries := entryFiles(t, cache)
	if len(entries) != len(d.files) {
		t.Fatalf("%d entry files, want %d", len(entries), len(d.files))
	}
	damaged := 0
	for i, p := range entries {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 0: // torn: the tail never reached the disk
			b = b[:len(b)/2]
		case 1: // a flipped bit in the last data byte
			b[len(b)-1] ^= 0x10
		case 2: // a flipped bit in the header
			b[9] ^= 0x01
		case 3: // untouched
			continue
		}
		damaged++
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m = fltMountDaemon(t, d.src, mnt, flags...)
	for range 2 { // the second epoch reads the re-admitted entries
		if err := d.readAll(t, mnt); err != nil {
			t.Fatal(err)
		}
	}
	in := m.cacheInfo(t)
	t.Logf("damaged %d of %d entries; disk: corrupt %d, hits %d, items %d", damaged, len(entries), in.Disk.Corrupt, in.Disk.Hits, in.Disk.Items)
	if in.Disk.Corrupt != int64(damaged) {
		t.Errorf("disk tier counts %d corrupt entries, want %d", in.Disk.Corrupt, damaged)
	}
}

// A cache disk that fills mid-epoch (a 1 MiB tmpfs under a 64 MiB budget):
// reads keep working and admission to the disk tier stops.
func TestFaultCacheDiskFull(t *testing.T) {
	d := newFltData(t, 60, 30000)
	cache := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", cache, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(cache, syscall.MNT_DETACH) })
	mnt := testMountpoint(t)
	m := fltMountDaemon(t, d.src, mnt, "--cache-mem", "0", "--cache-disk", "64MiB", "--cache-dir", cache)
	for range 2 {
		if err := d.readAll(t, mnt); err != nil {
			t.Fatal(err)
		}
	}
	in := m.cacheInfo(t)
	t.Logf("dataset %d B; disk: items %d, used %d, disabled %t (%s)", d.bytes, in.Disk.Items, in.Disk.UsedBytes, in.Disk.Disabled, in.Disk.DisabledReason)
	if !in.Disk.Disabled || in.Disk.Items == 0 || in.Disk.Items >= int64(len(d.files)) {
		t.Errorf("disk tier after the disk filled: disabled %t, %d items; want disabled with some but not all %d items", in.Disk.Disabled, in.Disk.Items, len(d.files))
	}
	if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
		t.Errorf("unmount with a full cache disk: exit %d, %s", code, stderr)
	}
}

// The cache directory removed under the running daemon: reads keep
// working (from the backend) and the mount unmounts.
func TestFaultCacheDirRemoved(t *testing.T) {
	d := newFltData(t, 40, 5000)
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := testMountpoint(t)
	m := fltMountDaemon(t, d.src, mnt, "--cache-mem", "0", "--cache-disk", "64MiB", "--cache-dir", cache)
	if err := d.readAll(t, mnt); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.readAll(t, mnt); err != nil {
			t.Fatalf("read after the cache directory was removed: %v", err)
		}
	}
	in := m.cacheInfo(t)
	t.Logf("disk after removal: items %d, corrupt %d, errors %d, disabled %t (%s)", in.Disk.Items, in.Disk.Corrupt, in.Disk.Errors, in.Disk.Disabled, in.Disk.DisabledReason)
	if in.Disk.Corrupt+in.Disk.Errors == 0 && !in.Disk.Disabled {
		t.Errorf("the removed entries went unnoticed: %+v", in.Disk)
	}
	if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
		t.Errorf("unmount after the cache directory was removed: exit %d, %s", code, stderr)
	}
}

// A backend that stalls 3 s before every first byte: readers get correct
// bytes late, and the stall is attributed to the files in stats.
func TestFaultBackendStall(t *testing.T) {
	const latency = 3 * time.Second
	d := newFltData(t, 4, 10000)
	mnt := testMountpoint(t)
	m := fltMountDaemon(t, d.src, mnt, "--cache-mem", "16MiB", "--backend-latency", latency.String())
	start := time.Now()
	if err := d.readAll(t, mnt); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := m.stats(t)
	t.Logf("4 files read in %v; fetch stall %.2fs, stall wall %.2fs", took, st.Totals.FetchStallSeconds, st.Totals.StallWallSeconds)
	if took < latency {
		t.Errorf("reads took %v, less than the backend latency %v", took, latency)
	}
	if st.Totals.FetchStallSeconds < 4*latency.Seconds()*0.9 || st.Totals.StallWallSeconds < latency.Seconds()*0.9 {
		t.Errorf("stall not attributed: fetch stall %.2fs (want >= ~%.0fs), stall wall %.2fs (want >= ~%.0fs)",
			st.Totals.FetchStallSeconds, 4*latency.Seconds(), st.Totals.StallWallSeconds, latency.Seconds())
	}
	// Once cached, no stall: a second epoch is fast.
	start = time.Now()
	if err := d.readAll(t, mnt); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= latency {
		t.Errorf("second epoch took %v; the memory tier should have hidden the backend", took)
	}
}

// A source file replaced while a reader has it open, between two chunks:
// the reader gets EIO or the whole new version, never a mix; a fresh open
// gets the new version.
func TestFaultSourceReplacedDuringRead(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	const name, size = "train/big.bin", 1 << 20
	full := filepath.Join(src, name)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	oldData, newData := pattern(name, size), pattern(name+"#v2", size+4096)
	if err := os.WriteFile(full, oldData, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []string{"0", "16MiB"} {
		t.Run("cache-mem="+cache, func(t *testing.T) {
			if err := os.WriteFile(full, oldData, 0o644); err != nil {
				t.Fatal(err)
			}
			mnt := testMountpoint(t)
			fltMountDaemon(t, src, mnt, "--cache-mem", cache, "--chunk-size", "64KiB")
			f, err := os.Open(filepath.Join(mnt, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			head := make([]byte, 64<<10)
			if _, err := io.ReadFull(f, head); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(head, oldData[:len(head)]) {
				t.Fatal("first chunk differs from the source")
			}
			tmp := full + ".tmp"
			if err := os.WriteFile(tmp, newData, 0o644); err != nil {
				t.Fatal(err)
			}
			// A different mtime even on a coarse clock.
			if err := os.Chtimes(tmp, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, full); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(f)
			got := append(head, rest...)
			switch {
			case errors.Is(err, syscall.EIO):
				t.Logf("open file after replacement: EIO after %d bytes", len(got))
				if !bytes.Equal(got, oldData[:len(got)]) {
					t.Error("bytes before the EIO differ from the old version")
				}
			case err != nil:
				t.Fatalf("read after replacement: %v, want EIO or the data", err)
			case bytes.Equal(got, oldData):
				t.Log("open file after replacement: the whole old version")
			default:
				t.Errorf("read after replacement: %d bytes that are neither the old (%d) nor the new (%d) version, a mix", len(got), len(oldData), len(newData))
			}
			// A fresh open sees the new version (or EIO while the
			// attributes are cached), never a mix.
			fresh, err := os.ReadFile(filepath.Join(mnt, name))
			switch {
			case errors.Is(err, syscall.EIO):
				t.Log("fresh open: EIO")
			case err != nil:
				t.Fatalf("fresh read: %v", err)
			case !bytes.Equal(fresh, newData) && !bytes.Equal(fresh, oldData):
				t.Errorf("fresh read: %d bytes, neither version", len(fresh))
			default:
				t.Logf("fresh open: %d bytes, new version %t", len(fresh), bytes.Equal(fresh, newData))
			}
		})
	}
}
