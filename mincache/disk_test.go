package mincache

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// diskOnly opens a cache with only a disk tier in dir.
func diskOnly(t *testing.T, dir, source string) *Cache {
	t.Helper()
	return mustOpen(t, Options{DiskBytes: 64 << 20, Dir: dir, Source: source})
}

func entryFile(t *testing.T, c *Cache, k Key) string {
	t.Helper()
	p := c.disk.entryPath(hashKey(k), hashVersion(k.Version))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("entry file of %v: %v", k, err)
	}
	return p
}

func admitN(t *testing.T, c *Cache, n, size int, want Tier) {
	t.Helper()
	for i := range n {
		if got := c.Admit(key(i), content(key(i), size+i)); got != want {
			t.Fatalf("Admit(item %d) = %v, want %v", i, got, want)
		}
	}
}

func TestDiskReloadIsWarmWithoutReadingData(t *testing.T) {
	dir := t.TempDir()
	const n, size = 50, 70 << 10
	c := diskOnly(t, dir, "s3://bucket/train")
	admitN(t, c, n, size, Disk)
	before := c.Info().Disk
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = diskOnly(t, dir, "s3://bucket/train")
	in := c.Info().Disk
	if in.Items != n || in.UsedBytes != before.UsedBytes {
		t.Fatalf("after reopen: %d items, %d bytes; want %d, %d", in.Items, in.UsedBytes, n, before.UsedBytes)
	}
	if in.ReadBytes != 0 {
		t.Fatalf("opening with an index read %d bytes of entry files, want 0", in.ReadBytes)
	}
	for i := range n {
		if tier, ok := readFull(t, c, key(i), size+i); !ok || tier != Disk {
			t.Fatalf("item %d after reopen: %v %v", i, tier, ok)
		}
	}

	// A crash (no Close) keeps what the append-only index recorded.
	c.Admit(key(n), content(key(n), size))
	crashed := c.disk
	crashed.lock.Close() // what the kernel does when the process dies
	c2 := diskOnly(t, dir, "s3://bucket/train")
	if got := c2.Info().Disk.Items; got != n+1 {
		t.Errorf("after crash: %d items, want %d", got, n+1)
	}
	if _, ok := readFull(t, c2, key(n), size); !ok {
		t.Error("entry admitted before the crash missed")
	}
}

func TestDiskIndexRebuild(t *testing.T) {
	dir := t.TempDir()
	const n, size = 40, 100 << 10
	c := diskOnly(t, dir, "src")
	admitN(t, c, n, size, Disk)
	ns := c.Info().Dir
	torn := entryFile(t, c, key(3))
	c.Close()

	// A torn entry (crash mid-write) and garbage must not survive a rebuild.
	if err := os.Truncate(torn, 5000); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(ns, "data", "00", "junk")
	os.MkdirAll(filepath.Dir(junk), 0o755)
	if err := os.WriteFile(junk, []byte("not an entry"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, corrupt := range []bool{false, true} {
		ip := filepath.Join(ns, indexName)
		if corrupt {
			os.WriteFile(ip, []byte("garbage index"), 0o644)
		} else if err := os.Remove(ip); err != nil {
			t.Fatal(err)
		}
		c = diskOnly(t, dir, "src")
		in := c.Info().Disk
		if in.Items != n-1 {
			t.Fatalf("rebuilt index (corrupt=%v) has %d items, want %d", corrupt, in.Items, n-1)
		}
		if max := int64(n) * maxHeader; in.ReadBytes > max || in.ReadBytes >= int64(n)*size {
			t.Errorf("rebuild read %d bytes: more than the headers", in.ReadBytes)
		}
		for i := range n {
			_, ok := readFull(t, c, key(i), size+i)
			if ok != (i != 3) {
				t.Errorf("item %d: hit %v", i, ok)
			}
		}
		if _, err := os.Stat(junk); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("junk entry kept: %v", err)
		}
		c.Close()
	}
}

func TestDiskCorruptEntryDropped(t *testing.T) {
	const size = 300 << 10 // 5 blocks
	for _, tc := range []struct {
		name   string
		damage func(path string, hdrLen int64) error
	}{
		{"data byte", func(p string, h int64) error { return flipByte(p, h+200<<10) }},
		{"header byte", func(p string, h int64) error { return flipByte(p, 20) }},
		{"truncated", func(p string, h int64) error { return os.Truncate(p, h+size/2) }},
		{"truncated header", func(p string, h int64) error { return os.Truncate(p, 30) }},
		{"removed", func(p string, h int64) error { return os.Remove(p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := diskOnly(t, t.TempDir(), "src")
			k, other := key(1), key(2)
			c.Admit(k, content(k, size))
			c.Admit(other, content(other, size))
			p := entryFile(t, c, k)
			e, _, _ := c.disk.lookup(hashKey(k), hashVersion(k.Version))
			if err := tc.damage(p, int64(e.hdrLen)); err != nil {
				t.Fatal(err)
			}
			if tier, ok := readFull(t, c, k, size); ok {
				t.Fatalf("damaged entry served (%v)", tier)
			}
			if _, tier := c.Lookup(k); tier != None {
				t.Errorf("damaged entry still indexed: %v", tier)
			}
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("damaged entry file kept: %v", err)
			}
			in := c.Info().Disk
			if in.Corrupt != 1 || in.Items != 1 {
				t.Errorf("Info = %+v, want 1 corrupt, 1 item", in)
			}
			if _, ok := readFull(t, c, other, size); !ok {
				t.Error("undamaged entry missed")
			}
			// Refetched and admitted again, it is served.
			if got := c.Admit(k, content(k, size)); got != Disk {
				t.Fatalf("re-Admit = %v", got)
			}
			if _, ok := readFull(t, c, k, size); !ok {
				t.Error("re-admitted entry missed")
			}
		})
	}
}

func flipByte(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0x40
	_, err = f.WriteAt(b, off)
	return err
}

// TestDiskPartialReadsVerifyOnlyTouchedBlocks: a 128 KiB read of a 4 MiB
// item reads and hashes at most three 64 KiB blocks, and returns the bytes.
func TestDiskPartialReadsVerifyOnlyTouchedBlocks(t *testing.T) {
	const size = 4 << 20
	c := diskOnly(t, t.TempDir(), "src")
	k := Key{Path: "shard-0001.tar", Version: "123-456", Chunk: 7}
	c.Admit(k, content(k, size))
	e, _, _ := c.disk.lookup(hashKey(k), hashVersion(k.Version))
	for _, r := range []struct{ off, n int64 }{
		{0, 128 << 10}, {100000, 128 << 10}, {64 << 10, 64 << 10}, {size - 1000, 128 << 10}, {3, 5}, {size, 10},
	} {
		before := c.Info().Disk.ReadBytes
		buf := make([]byte, r.n)
		n, tier, ok := c.ReadAt(k, buf, r.off)
		want := min(r.n, size-r.off)
		if !ok || tier != Disk || int64(n) != want {
			t.Fatalf("ReadAt(%d, %d) = %d %v %v, want %d", r.off, r.n, n, tier, ok, want)
		}
		checkBytes(t, k, buf[:n], r.off)
		if read := c.Info().Disk.ReadBytes - before; read > int64(e.hdrLen)+3*entryBlockSize {
			t.Errorf("ReadAt(%d, %d) read %d bytes from disk", r.off, r.n, read)
		}
	}
	// Damage in a block a read does not touch does not fail that read;
	// a read that touches it drops the entry.
	p := entryFile(t, c, k)
	if err := flipByte(p, int64(e.hdrLen)+40*entryBlockSize+5); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.ReadAt(k, make([]byte, 1000), 0); !ok {
		t.Error("read of an intact block missed")
	}
	if _, _, ok := c.ReadAt(k, make([]byte, 1000), 40*entryBlockSize); ok {
		t.Error("read of a damaged block hit")
	}
	if _, tier := c.Lookup(k); tier != None {
		t.Error("entry with a damaged block kept")
	}
}

func TestDiskVersionChangeInvalidates(t *testing.T) {
	dir := t.TempDir()
	c := diskOnly(t, dir, "src")
	k1 := Key{Path: "x/y.jpg", Version: "1"}
	k2 := Key{Path: "x/y.jpg", Version: "2"}
	c.Admit(k1, content(k1, 5000))
	old := entryFile(t, c, k1)
	if _, ok := readFull(t, c, k2, 5000); ok {
		t.Fatal("new version served from the old entry")
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old entry file kept: %v", err)
	}
	if in := c.Info().Disk; in.Invalidated != 1 || in.Items != 0 || in.UsedBytes != 0 {
		t.Errorf("Info = %+v", in)
	}
	c.Admit(k2, content(k2, 6000))
	c.Close()
	c = diskOnly(t, dir, "src")
	if _, ok := readFull(t, c, k2, 6000); !ok {
		t.Error("new version missed after reopen")
	}
	// The caller's version is authoritative: asking for the old one again
	// invalidates the newer entry rather than serving it.
	if _, ok := readFull(t, c, k1, 5000); ok {
		t.Error("old version served after reopen")
	}
	if _, tier := c.Lookup(k2); tier != None {
		t.Errorf("entry of version 2 kept after a read of version 1: %v", tier)
	}
}

func TestDiskLockAndNamespaces(t *testing.T) {
	dir := t.TempDir()
	a := diskOnly(t, dir, "azblob://acct/ctr")
	_, err := Open(Options{DiskBytes: 1 << 20, Dir: dir, Source: "azblob://acct/ctr"})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of a namespace: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q does not name the holder", err)
	}
	b := diskOnly(t, dir, "s3://bucket")
	// The same key under two sources holds each source's own bytes.
	k := key(5)
	ka, kb := k, k
	kb.Version = "other"
	a.Admit(k, content(ka, 1000))
	b.Admit(k, content(kb, 1000))
	bufA, bufB := make([]byte, 1000), make([]byte, 1000)
	if _, _, ok := a.ReadAt(k, bufA, 0); !ok {
		t.Fatal("a missed")
	}
	if _, _, ok := b.ReadAt(k, bufB, 0); !ok {
		t.Fatal("b missed")
	}
	checkBytes(t, ka, bufA, 0)
	checkBytes(t, kb, bufB, 0)
	// Released by Close, the namespace opens again.
	a.Close()
	diskOnly(t, dir, "azblob://acct/ctr")
}

// TestDiskLockAcrossProcesses: a lock held by another process is refused.
func TestDiskLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	ns := filepath.Join(dir, namespace("src"))
	os.MkdirAll(ns, 0o755)
	lock := filepath.Join(ns, "lock")
	os.WriteFile(lock, nil, 0o644)
	// flock(1) holds the lock while its child reads stdin.
	cmd := exec.CommandContext(t.Context(), "flock", "-x", lock, "cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("flock(1): %v", err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	// Wait until it holds the lock: cat echoes a line only after flock got it.
	stdin.Write([]byte("ready\n"))
	if _, err := stdout.Read(make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{DiskBytes: 1 << 20, Dir: dir, Source: "src"}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open under another process's lock: %v", err)
	}
}

// TestDiskENOSPC: a full file system stops admission to the disk tier,
// logged once; existing entries keep being served.
func TestDiskENOSPC(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	logs := &lineCounter{match: "admission disabled"}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	c, err := Open(Options{MemBytes: 100 << 10, DiskBytes: 64 << 20, Dir: dir, Source: "src", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 100 << 10
	var onDisk []int
	for i := range 30 {
		switch c.Admit(key(i), content(key(i), size)) {
		case Disk:
			onDisk = append(onDisk, i)
		case None:
			if len(onDisk) == 0 {
				t.Fatal("nothing admitted to disk")
			}
		}
	}
	in := c.Info().Disk
	if !in.Disabled || !strings.Contains(in.DisabledReason, "no space") {
		t.Fatalf("disk tier not disabled by ENOSPC: %+v", in)
	}
	if len(onDisk) >= 10 || len(onDisk) < 3 {
		t.Errorf("%d items on a 1 MiB disk", len(onDisk))
	}
	for _, i := range onDisk {
		if _, ok := readFull(t, c, key(i), size); !ok {
			t.Errorf("item %d on disk missed after ENOSPC", i)
		}
	}
	if got := c.Admit(key(99), content(key(99), 10)); got != None {
		t.Errorf("Admit after ENOSPC = %v", got)
	}
	if n := logs.n.Load(); n != 1 {
		t.Errorf("disabling logged %d times, want once", n)
	}
	// Drop frees the space and re-enables admission.
	if err := c.Drop(); err != nil {
		t.Fatal(err)
	}
	if got := c.Admit(key(98), content(key(98), size)); got != Memory {
		t.Errorf("Admit after Drop = %v, want memory", got)
	}
	if got := c.Admit(key(97), content(key(97), size)); got != Disk {
		t.Errorf("Admit after Drop = %v, want disk", got)
	}
}

// TestDiskDirRemoved: the cache directory vanishing under a running cache
// causes misses and disables admission, without a panic.
func TestDiskDirRemoved(t *testing.T) {
	dir := t.TempDir()
	c := diskOnly(t, dir, "src")
	admitN(t, c, 10, 1000, Disk)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, ok := readFull(t, c, key(i), 1000+i); ok {
			t.Fatalf("item %d hit after its file was removed", i)
		}
	}
	if got := c.Admit(key(50), content(key(50), 1000)); got != None {
		t.Errorf("Admit = %v, want none", got)
	}
	in := c.Info().Disk
	if !in.Disabled || in.Items != 0 || in.Corrupt != 10 {
		t.Errorf("Info = %+v, want disabled, 0 items, 10 dropped", in)
	}
	c.Close() // may fail to write the index; must not panic
}

func TestDiskHitPromotedToMemory(t *testing.T) {
	dir := t.TempDir()
	const size = 200 << 10
	c := diskOnly(t, dir, "src")
	admitN(t, c, 3, size, Disk)
	c.Close()
	c = mustOpen(t, Options{MemBytes: 2*size + 10, DiskBytes: 64 << 20, Dir: dir, Source: "src"})
	for i := range 3 {
		buf := make([]byte, 1000)
		n, tier, ok := c.ReadAt(key(i), buf, 5000) // a partial read promotes the whole item
		if !ok || tier != Disk || n != 1000 {
			t.Fatalf("item %d: first read %d %v %v", i, n, tier, ok)
		}
		checkBytes(t, key(i), buf, 5000)
	}
	for i := range 3 {
		want := Memory
		if i == 2 {
			want = Disk // memory was full
		}
		if tier, ok := readFull(t, c, key(i), size+i); !ok || tier != want {
			t.Errorf("item %d: second read from %v (hit %v), want %v", i, tier, ok, want)
		}
	}
	if in := c.Info().Memory; in.Items != 2 || in.Admitted != 2 {
		t.Errorf("memory Info = %+v", in)
	}
}

func TestDiskBudget(t *testing.T) {
	const size = 10 << 10
	c := mustOpen(t, Options{DiskBytes: 5 * (size + 200), Dir: t.TempDir(), Source: "src"})
	var taken int
	for i := range 10 {
		if c.Admit(key(i), content(key(i), size)) == Disk {
			if i != taken {
				t.Errorf("item %d admitted after item %d was rejected", i, taken)
			}
			taken++
		}
	}
	in := c.Info().Disk
	if taken != 5 || in.UsedBytes > in.BudgetBytes || in.RejectedFull != 5 {
		t.Errorf("%d admitted, Info %+v", taken, in)
	}
}

// lineCounter counts log lines containing match.
type lineCounter struct {
	match string
	n     atomic.Int64
}

func (w *lineCounter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.n.Add(1)
	}
	return len(p), nil
}

// TestDiskIndexTornTail: a record cut short by a crash is ignored and cut
// off; records appended afterwards are replayed.
func TestDiskIndexTornTail(t *testing.T) {
	dir := t.TempDir()
	c := diskOnly(t, dir, "src")
	admitN(t, c, 5, 1000, Disk)
	ip := filepath.Join(c.Info().Dir, indexName)
	c.Close()
	f, err := os.OpenFile(ip, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := encodeRecord(recDel, hashKey(key(0)), diskEntry{ver: hashVersion("v1")})
	f.Write(r[:20])
	f.Close()

	c = diskOnly(t, dir, "src")
	if got := c.Info().Disk.Items; got != 5 {
		t.Fatalf("%d items after a torn tail, want 5", got)
	}
	c.Admit(key(5), content(key(5), 1000))
	c.disk.lock.Close() // crash: no compaction
	c = diskOnly(t, dir, "src")
	in := c.Info().Disk
	if in.Items != 6 || in.ReadBytes != 0 {
		t.Fatalf("after append past a torn tail: %+v", in)
	}
	if _, ok := readFull(t, c, key(0), 1000); !ok {
		t.Error("item 0 missed")
	}
}
