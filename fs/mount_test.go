package fs

import (
	"bytes"
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountDir mounts directory src through dirBackend and unmounts it in
// cleanup.
func mountDir(t *testing.T, src string, opts Options) (*Mount, string) {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if opts.ControlSocket == "" {
		opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	}
	m, err := New(t.Context(), mnt, dirBackend{root: src}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return m, mnt
}

func writePat(t *testing.T, p string, seed, size int64) {
	t.Helper()
	buf := make([]byte, size)
	fillPat(buf, seed, 0)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

const sparseSize = 5 << 30

var sparseOffsets = []int64{0, 4<<20 - 3, 1 << 30, 4<<30 + 17, sparseSize - 4096}

// makeOddTree writes the awkward dataset of the tree walk test.
func makeOddTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writePat(t, filepath.Join(src, "with space", "a b.jpg"), 1, 1000)
	writePat(t, filepath.Join(src, "ünïcødé", "日本語.png"), 2, 2000)
	writePat(t, filepath.Join(src, strings.Repeat("n", 255)), 3, 300)
	writePat(t, filepath.Join(src, "empty"), 0, 0)
	if err := os.Mkdir(filepath.Join(src, "emptydir"), 0o700); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(src, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	deep := src
	for i := range 40 {
		deep = filepath.Join(deep, fmt.Sprintf("d%d", i))
	}
	writePat(t, filepath.Join(deep, "leaf"), 4, 4000)
	exe := filepath.Join(src, "run.sh")
	writePat(t, exe, 5, 10)
	if err := os.Chmod(exe, 0o750); err != nil {
		t.Fatal(err)
	}
	// A sparse 5 GiB file with the pattern written at a few offsets.
	sf, err := os.Create(filepath.Join(src, "sparse.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sf.Truncate(sparseSize); err != nil {
		t.Fatal(err)
	}
	for _, off := range sparseOffsets {
		buf := make([]byte, 4096)
		fillPat(buf, 9, off)
		if _, err := sf.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	sf.Close()
	for _, l := range [][2]string{
		{"with space/a b.jpg", "link-to-file"},
		{"ünïcødé", "link-to-dir"},
		{"nowhere", "dangling"},
	} {
		if err := os.Symlink(l[0], filepath.Join(src, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

type walkRec struct {
	path, target string
	mode         iofs.FileMode
	size         int64
	mtime        time.Time
}

func walkRecs(t *testing.T, root string, mountView bool) []walkRec {
	t.Helper()
	var out []walkRec
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		r := walkRec{path: rel, mode: fi.Mode(), mtime: fi.ModTime()}
		switch {
		case fi.Mode().IsRegular():
			r.size = fi.Size()
			if !mountView {
				r.mode = fi.Mode()&^0o222 | 0o444
			}
		case fi.IsDir():
			if !mountView {
				r.mode = fi.Mode()&^0o222 | 0o555
			}
		case fi.Mode()&iofs.ModeSymlink != 0:
			if r.target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if rel == "." {
			r.mtime = time.Time{} // the root is the mountpoint's own dir on the source side
			r.mode = r.mode.Type()
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMountTreeEqualsSource(t *testing.T) {
	t.Parallel()
	src := makeOddTree(t)
	m, mnt := mountDir(t, src, Options{})
	want, got := walkRecs(t, src, false), walkRecs(t, mnt, true)
	if len(got) != len(want) {
		t.Fatalf("mount has %d entries, source %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !w.mtime.Equal(g.mtime) {
			t.Errorf("%s: mtime %v, want %v", g.path, g.mtime, w.mtime)
		}
		w.mtime, g.mtime = time.Time{}, time.Time{}
		if w != g {
			t.Fatalf("entry %d: mount %+v, source %+v", i, g, w)
		}
	}
	// The root lists exactly the source's entries.
	names := func(dir string) []string {
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, d := range des {
			n = append(n, d.Name())
		}
		return n
	}
	if g, w := names(mnt), names(src); !slices.Equal(g, w) {
		t.Errorf("root listing %q, want %q", g, w)
	}
	if m.Files() != 20000+6+1 {
		t.Errorf("Files() = %d", m.Files())
	}
	// Contents, also through symlinks (the kernel follows them).
	for _, c := range []struct {
		path       string
		seed, size int64
	}{
		{"with space/a b.jpg", 1, 1000}, {"link-to-file", 1, 1000},
		{"link-to-dir/日本語.png", 2, 2000}, {strings.Repeat("n", 255), 3, 300},
		{"empty", 0, 0}, {"big/f12345", 0, 0},
		{strings.Repeat("d0/", 1)[:0] + deepPath() + "/leaf", 4, 4000},
	} {
		b, err := os.ReadFile(filepath.Join(mnt, c.path))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != c.size {
			t.Fatalf("%s: %d bytes, want %d", c.path, len(b), c.size)
		}
		checkPat(t, c.path, b, c.seed, 0)
	}
	if _, err := os.Stat(filepath.Join(mnt, "dangling")); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("stat dangling link: %v, want not exist", err)
	}
	// The sparse file: pattern where written, zeros elsewhere.
	sf, err := os.Open(filepath.Join(mnt, "sparse.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	for _, off := range sparseOffsets {
		buf := make([]byte, 4096)
		if n, err := sf.ReadAt(buf, off); n != 4096 {
			t.Fatalf("sparse read at %d: %d, %v", off, n, err)
		}
		checkPat(t, "sparse", buf, 9, off)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		off := rng.Int64N(sparseSize - 8192)
		buf := make([]byte, 8192)
		if n, err := sf.ReadAt(buf, off); n != len(buf) {
			t.Fatalf("sparse read at %d: %d, %v", off, n, err)
		}
		for i, b := range buf {
			written := false
			for _, w := range sparseOffsets {
				if o := off + int64(i); o >= w && o < w+4096 {
					written = true
					if b != patByte(9, o) {
						t.Fatalf("sparse byte %d wrong", o)
					}
				}
			}
			if !written && b != 0 {
				t.Fatalf("sparse byte %d = %#x, want 0", off+int64(i), b)
			}
		}
	}
	if n, err := sf.ReadAt(make([]byte, 10), sparseSize); n != 0 {
		t.Errorf("read at EOF of sparse: %d, %v", n, err)
	}
}

func deepPath() string {
	var parts []string
	for i := range 40 {
		parts = append(parts, fmt.Sprintf("d%d", i))
	}
	return strings.Join(parts, "/")
}

// makeDataset writes files of assorted sizes, small and multi-chunk, and
// returns their paths and seeds.
func makeDataset(t *testing.T, src string) map[string]int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	files := map[string]int64{}
	for i := range 64 {
		p := fmt.Sprintf("class%02d/img%03d.jpg", i%8, i)
		size := rng.Int64N(120_000)
		if i%32 == 0 {
			size = 2<<20 + rng.Int64N(1<<20) // several 1 MiB chunks
		}
		writePat(t, filepath.Join(src, p), int64(i+1), size)
		files[p] = int64(i + 1)
	}
	return files
}

func TestMountConcurrentReaders(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := makeDataset(t, src)
	_, mnt := mountDir(t, src, Options{ChunkSize: 1 << 20})
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	})
	want := map[string][]byte{}
	for p, seed := range files {
		fi, err := os.Stat(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		want[p] = make([]byte, fi.Size())
		fillPat(want[p], seed, 0)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			// Each reader takes a random third of the files plus the
			// multi-chunk ones, so readers overlap on every file.
			order := slices.Clone(paths)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			order = order[:len(order)/3]
			for p, w := range want {
				if len(w) > 1<<20 && !slices.Contains(order, p) {
					order = append(order, p)
				}
			}
			for _, p := range order {
				b, err := os.ReadFile(filepath.Join(mnt, p))
				if err != nil {
					errs <- err
					return
				}
				want := want[p]
				if !bytes.Equal(b, want) {
					errs <- fmt.Errorf("reader %d: %s differs (%d bytes, want %d)", r, p, len(b), len(want))
					return
				}
				// A random-offset read and a read past EOF.
				f, err := os.Open(filepath.Join(mnt, p))
				if err != nil {
					errs <- err
					return
				}
				if len(b) > 0 {
					off := rng.Int64N(int64(len(b)))
					buf := make([]byte, min(70_000, int64(len(b))-off))
					if n, err := f.ReadAt(buf, off); n != len(buf) {
						errs <- fmt.Errorf("%s pread at %d: %d, %v", p, off, n, err)
					} else if !bytes.Equal(buf, want[off:off+int64(n)]) {
						errs <- fmt.Errorf("%s pread at %d differs", p, off)
					}
				}
				if n, _ := f.ReadAt(make([]byte, 100), int64(len(b))+5); n != 0 {
					errs <- fmt.Errorf("%s: read past EOF returned %d bytes", p, n)
				}
				f.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMountErrnos(t *testing.T) {
	src := t.TempDir()
	writePat(t, filepath.Join(src, "d", "f"), 1, 100)
	writePat(t, filepath.Join(src, "g"), 2, 100)
	m, mnt := mountDir(t, src, Options{})
	f := filepath.Join(mnt, "d", "f")
	d := filepath.Join(mnt, "d")
	mustErrno := func(what string, err error, want syscall.Errno) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	_, err := os.Stat(filepath.Join(mnt, "missing"))
	mustErrno("stat missing", err, syscall.ENOENT)
	_, err = os.Open(filepath.Join(mnt, "d", "missing"))
	mustErrno("open missing", err, syscall.ENOENT)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"open O_WRONLY", openErr(f, os.O_WRONLY)},
		{"open O_RDWR", openErr(f, os.O_RDWR)},
		{"open O_TRUNC", openErr(f, os.O_RDONLY|os.O_TRUNC)},
		{"creat", openErr(filepath.Join(d, "new"), os.O_CREATE|os.O_WRONLY)},
		{"mkdir", os.Mkdir(filepath.Join(d, "nd"), 0o755)},
		{"rename", os.Rename(f, filepath.Join(d, "f2"))},
		{"unlink", os.Remove(f)},
		{"rmdir", syscall.Rmdir(d)},
		{"symlink", os.Symlink("f", filepath.Join(d, "l"))},
		{"link", os.Link(f, filepath.Join(d, "h"))},
		{"chmod", os.Chmod(f, 0o777)},
		{"chown", os.Chown(f, 1, 1)},
		{"truncate", os.Truncate(f, 0)},
		{"utimes", os.Chtimes(f, time.Now(), time.Now())},
		{"setxattr", unix.Setxattr(f, "user.x", []byte("v"), 0)},
		{"removexattr", unix.Removexattr(f, "user.x")},
		{"mknod", unix.Mknod(filepath.Join(d, "fifo"), unix.S_IFIFO|0o644, 0)},
	} {
		mustErrno(c.name, c.err, syscall.EROFS)
	}
	_, err = unix.Getxattr(f, "user.unknown", make([]byte, 64))
	mustErrno("getxattr unknown", err, syscall.ENODATA)
	_, err = unix.Getxattr(mnt, "user.other", make([]byte, 64))
	mustErrno("getxattr unknown on root", err, syscall.ENODATA)
	// The control attribute answers on the root only, and is not listed.
	buf := make([]byte, 256)
	n, err := unix.Getxattr(mnt, ControlXattr, buf)
	if err != nil || string(buf[:n]) != m.ControlSocket() {
		t.Errorf("getxattr control = %q, %v; want %q", buf[:n], err, m.ControlSocket())
	}
	if sz, err := unix.Listxattr(mnt, buf); err != nil || sz != 0 {
		t.Errorf("listxattr root = %d, %v; want empty", sz, err)
	}
	// statfs reports the dataset's size.
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*uint64(st.Bsize) < 200 || st.Bfree != 0 {
		t.Errorf("statfs blocks %d bsize %d free %d", st.Blocks, st.Bsize, st.Bfree)
	}
	// /proc/self/mountinfo shows a read-only stallfs mount.
	info, _ := os.ReadFile("/proc/self/mountinfo")
	found := false
	for _, line := range strings.Split(string(info), "\n") {
		if strings.Contains(line, " "+mnt+" ") {
			found = strings.Contains(line, "fuse.stallfs") && strings.Contains(line, " ro") &&
				strings.Contains(line, "max_read=1048576")
		}
	}
	if !found {
		t.Errorf("mount of %s not read-only fuse.stallfs with 1 MiB reads in mountinfo:\n%s", mnt, info)
	}
}

func openErr(p string, flag int) error {
	f, err := os.OpenFile(p, flag, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

// The node methods answer EROFS themselves too, for a kernel that lets the
// call through.
func TestNodeMutatorsAnswerEROFS(t *testing.T) {
	ctx := t.Context()
	d := &dirNode{}
	f := &fileNode{}
	l := &linkNode{}
	_, e1 := d.Mkdir(ctx, "x", 0, nil)
	_, e2 := d.Mknod(ctx, "x", 0, 0, nil)
	_, e3 := d.Link(ctx, nil, "x", nil)
	_, e4 := d.Symlink(ctx, "t", "x", nil)
	_, _, _, e5 := d.Create(ctx, "x", 0, 0, nil)
	_, _, _, e6 := d.Tmpfile(ctx, 0, 0, nil)
	_, e7 := f.Write(ctx, nil, nil, 0)
	_, _, e8 := f.Open(ctx, syscall.O_RDWR)
	_, _, e9 := f.Open(ctx, syscall.O_RDONLY|syscall.O_TRUNC)
	for i, e := range []syscall.Errno{
		e1, e2, e3, e4, e5, e6, e7, e8, e9,
		d.Unlink(ctx, "x"), d.Rmdir(ctx, "x"), d.Rename(ctx, "x", d, "y", 0),
		d.Setattr(ctx, nil, nil, nil), f.Setattr(ctx, nil, nil, nil), l.Setattr(ctx, nil, nil, nil),
		d.Setxattr(ctx, "user.a", nil, 0), f.Removexattr(ctx, "user.a"), f.Allocate(ctx, nil, 0, 1, 0),
	} {
		if e != syscall.EROFS {
			t.Errorf("mutator %d: %v, want EROFS", i, e)
		}
	}
}

func TestMountUnmountWithOpenFiles(t *testing.T) {
	src := t.TempDir()
	writePat(t, filepath.Join(src, "f"), 1, 10_000)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := New(t.Context(), mnt, dirBackend{root: src}, Options{ControlSocket: filepath.Join(t.TempDir(), "c.sock")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("unmount with open files: %v", err)
	}
	if mounted, err := IsMountpoint(mnt); err != nil || mounted {
		t.Fatalf("after unmount: mounted=%v err=%v", mounted, err)
	}
	if err := CheckMountpoint(mnt); err != nil {
		t.Fatalf("mountpoint not reusable after unmount: %v", err)
	}
	f.Close()
	dir.Close()
	waited := make(chan struct{})
	go func() { m.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after the last open file was closed")
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
}

// A read blocked on a backend that never answers does not hold up
// Unmount: the fill is cancelled and the reader gets an error.
func TestMountUnmountCancelsBlockedFill(t *testing.T) {
	b := newFakeBackend(map[string]int64{"d/f": 5000})
	b.gate = make(chan struct{}) // never opened
	b.entered = make(chan string, 1)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := New(t.Context(), mnt, b, Options{ControlSocket: filepath.Join(t.TempDir(), "c.sock")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mnt, "d", "f"))
	if err != nil {
		m.Unmount()
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := f.Read(make([]byte, 100))
		readErr <- err
	}()
	select {
	case <-b.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("read never reached the backend")
	}
	unmounted := make(chan error, 1)
	go func() { unmounted <- m.Unmount() }()
	select {
	case err := <-unmounted:
		if err != nil {
			t.Fatalf("unmount: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Unmount hung on a blocked fill")
	}
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("blocked read succeeded after unmount")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("blocked read did not return after unmount")
	}
	f.Close()
}

// A mount unmounted from outside (umount) still Unmounts without error.
func TestMountUnmountedFromOutside(t *testing.T) {
	src := t.TempDir()
	writePat(t, filepath.Join(src, "f"), 1, 10)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := New(t.Context(), mnt, dirBackend{root: src}, Options{ControlSocket: filepath.Join(t.TempDir(), "c.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		m.Unmount()
		t.Fatal(err)
	}
	m.Wait()
	if err := m.Unmount(); err != nil {
		t.Errorf("Unmount after an outside umount: %v", err)
	}
}
