package fs

import (
	"context"
	"encoding/binary"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/backend"
)

// opCounter is a slog handler that counts go-fuse's debug lines of
// received READDIR and READDIRPLUS requests ("rx 12: READDIR n3 ...").
type opCounter struct{ readdir, readdirplus atomic.Int64 }

func (c *opCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *opCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *opCounter) WithGroup(string) slog.Handler            { return c }
func (c *opCounter) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "rx ") {
		return nil
	}
	switch {
	case strings.Contains(r.Message, ": READDIR "):
		c.readdir.Add(1)
	case strings.Contains(r.Message, ": READDIRPLUS "):
		c.readdirplus.Add(1)
	}
	return nil
}

// bigDirEntry is child i of the big directory: long names (~200 bytes,
// so a 4 KiB READDIR holds ~17), every 97th a directory, every 251st a
// symlink, the rest regular files.
func bigDirEntry(i int) backend.Entry {
	e := backend.Entry{
		Name:    fmt.Sprintf("%05d-%s", i, strings.Repeat(string(rune('a'+i%26)), 190+i%13)),
		Mode:    0o644,
		Size:    int64(i),
		ModTime: time.Unix(1_700_000_000, 0),
		Version: fmt.Sprint(i),
	}
	switch {
	case i%97 == 0:
		e.Mode = iofs.ModeDir | 0o755
	case i%251 == 0:
		e.Mode, e.Target = iofs.ModeSymlink|0o777, "00001"
	}
	return e
}

// mountBigDir mounts a tree whose directory "big" has n children
// (bigDirEntry), with go-fuse's request log counted by c.
func mountBigDir(t *testing.T, n int, c *opCounter) (*Mount, string) {
	t.Helper()
	mtime := time.Unix(1_700_000_000, 0)
	kids := make([]backend.Entry, n)
	listing := map[string][]backend.Entry{"": {{Name: "big", Mode: iofs.ModeDir | 0o755, ModTime: mtime}}}
	for i := range kids {
		kids[i] = bigDirEntry(i)
		if kids[i].Mode.IsDir() {
			listing["big/"+kids[i].Name] = nil
		}
	}
	listing["big"] = kids
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(t.Context(), mnt, listingBackend{listing}, Options{
		ControlSocket: filepath.Join(t.TempDir(), "c.sock"),
		Logger:        slog.New(c),
		Debug:         true,
	})
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

// dirent is one entry as getdents64 returns it.
type dirent struct {
	ino  uint64
	typ  uint8
	name string
}

// getdents reads the open directory fd to its end with getdents64 calls
// of bufSize bytes.
func getdents(t *testing.T, fd int, bufSize int) []dirent {
	t.Helper()
	var out []dirent
	buf := make([]byte, bufSize)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatalf("getdents: %v", err)
		}
		if n == 0 {
			return out
		}
		out = append(out, parseDirents(buf[:n])...)
	}
}

// parseDirents decodes linux_dirent64 records.
func parseDirents(b []byte) []dirent {
	var out []dirent
	for len(b) > 0 {
		reclen := binary.NativeEndian.Uint16(b[16:])
		name := b[19:reclen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, dirent{ino: binary.NativeEndian.Uint64(b), typ: b[18], name: string(name)})
		b = b[reclen:]
	}
	return out
}

// checkBigListing checks that got is the whole big directory of n
// children, in order, with the type and inode number of each.
func checkBigListing(t *testing.T, m *Mount, got []dirent, n int) {
	t.Helper()
	// The kernel adds nothing; go-fuse lists no "." or "..".
	if len(got) != n {
		t.Fatalf("listed %d entries, want %d", len(got), n)
	}
	big, ok := m.tree.lookupPath("big")
	if !ok {
		t.Fatal("no big in the tree")
	}
	first := m.tree.dirs[m.tree.ents[big].ref].first
	for i, d := range got {
		want := bigDirEntry(i)
		wantTyp := uint8(unix.DT_REG)
		switch {
		case want.Mode.IsDir():
			wantTyp = unix.DT_DIR
		case want.Mode&iofs.ModeSymlink != 0:
			wantTyp = unix.DT_LNK
		}
		a := m.direntOf(first + uint32(i))
		if d.name != want.Name || d.typ != wantTyp || d.ino != a.Ino {
			t.Fatalf("entry %d: got %q type %d ino %d, want %q type %d ino %d", i, d.name, d.typ, d.ino, want.Name, wantTyp, a.Ino)
		}
	}
}

// listBig opens mnt/big, lists it with getdents of bufSize and closes it.
func listBig(t *testing.T, mnt string, bufSize int) []dirent {
	t.Helper()
	fd, err := unix.Open(filepath.Join(mnt, "big"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	return getdents(t, fd, bufSize)
}

// A directory of many READDIR buffers is listed whole and in order with
// the right types and inode numbers; the second listing comes from the
// kernel's directory cache (no READDIR reaches the daemon), and no
// READDIRPLUS is ever sent.
func TestReaddirLargeDirectoryCached(t *testing.T) {
	const n = 5000
	var c opCounter
	m, mnt := mountBigDir(t, n, &c)

	checkBigListing(t, m, listBig(t, mnt, 8192), n)
	first := c.readdir.Load()
	// 5,000 entries of ~230 bytes: ~1.1 MiB, many READDIRs (the kernel
	// sizes them by the getdents buffer, 4 KiB at least, 8 KiB here).
	if first < 10 {
		t.Errorf("first listing took %d READDIRs, want many", first)
	}
	t.Logf("first listing: %d READDIRs", first)
	checkBigListing(t, m, listBig(t, mnt, 32768), n)
	// And through Go's reader (os.ReadDir sorts: the tree's order is byte
	// order too).
	des, err := os.ReadDir(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != n {
		t.Fatalf("os.ReadDir: %d entries, want %d", len(des), n)
	}
	for i, d := range des {
		if want := bigDirEntry(i); d.Name() != want.Name || d.IsDir() != want.Mode.IsDir() {
			t.Fatalf("os.ReadDir entry %d: %q dir=%v, want %q dir=%v", i, d.Name(), d.IsDir(), want.Name, want.Mode.IsDir())
		}
	}
	if got := c.readdir.Load() - first; got != 0 {
		t.Errorf("listings after the first sent %d READDIRs, want 0 (kernel dir cache)", got)
	}
	if got := c.readdirplus.Load(); got != 0 {
		t.Errorf("%d READDIRPLUS requests, want 0", got)
	}
}

// Readers that list the same uncached directory at once, with small and
// odd buffers, a rewind half way, each get the whole listing in order.
func TestReaddirConcurrentAndRewind(t *testing.T) {
	const n = 3000
	var c opCounter
	m, mnt := mountBigDir(t, n, &c)
	var wg sync.WaitGroup
	lists := make([][]dirent, 6)
	for r := range lists {
		wg.Go(func() {
			fd, err := unix.Open(filepath.Join(mnt, "big"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(fd)
			buf := make([]byte, 1024+r*700)
			// A few getdents, then back to the start.
			for range r {
				if _, err := unix.Getdents(fd, buf); err != nil {
					t.Errorf("getdents: %v", err)
					return
				}
			}
			if _, err := unix.Seek(fd, 0, 0); err != nil {
				t.Errorf("rewind: %v", err)
				return
			}
			lists[r] = getdents(t, fd, len(buf))
		})
	}
	wg.Wait()
	for r, l := range lists {
		t.Run(fmt.Sprint("reader", r), func(t *testing.T) { checkBigListing(t, m, l, n) })
	}
}

// The directory handle answers a READDIR at any offset from that offset:
// entry i carries offset i+1, and Seekdir to it continues with entry i+1.
func TestDirHandleOffsets(t *testing.T) {
	listing := map[string][]backend.Entry{"": nil}
	for i := range 50 {
		e := bigDirEntry(i)
		listing[""] = append(listing[""], e)
		if e.Mode.IsDir() {
			listing[e.Name] = nil
		}
	}
	tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir | 0o755}, listing)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mount{tree: tr}
	h, flags, errno := (&dirNode{m: m, dir: 0}).OpendirHandle(t.Context(), syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	if want := uint32(fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE); flags&want != want {
		t.Errorf("opendir flags %#x, want CACHE_DIR and KEEP_CACHE", flags)
	}
	dh := h.(*dirHandle)
	read := func() []string {
		var names []string
		for {
			de, errno := dh.Readdirent(t.Context())
			if errno != 0 {
				t.Fatal(errno)
			}
			if de == nil {
				return names
			}
			if want := uint64(len(names)) + 1; de.Off != want {
				t.Fatalf("entry %q has offset %d, want %d", de.Name, de.Off, want)
			}
			names = append(names, de.Name)
		}
	}
	all := read()
	if len(all) != 50 || !slices.IsSorted(all) {
		t.Fatalf("listed %d names (sorted: %v), want 50 sorted", len(all), slices.IsSorted(all))
	}
	for _, off := range []uint64{0, 1, 17, 49, 50, 51, 1 << 40} {
		if errno := dh.Seekdir(t.Context(), off); errno != 0 {
			t.Fatalf("Seekdir(%d): %v", off, errno)
		}
		de, _ := dh.Readdirent(t.Context())
		switch {
		case off >= 50 && de != nil:
			t.Errorf("Seekdir(%d) then %q, want the end", off, de.Name)
		case off < 50 && (de == nil || de.Name != all[off] || de.Off != off+1):
			t.Errorf("Seekdir(%d) then %+v, want %q at offset %d", off, de, all[off], off+1)
		}
	}
}
