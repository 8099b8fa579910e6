package local

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
)

// linkTree builds, under a fresh directory, a root holding a file, a
// directory, and links to each of them (relative and absolute), a dangling
// link, and links that leave the root; a secret file lies beside the root.
func linkTree(t *testing.T) (root string) {
	base := t.TempDir()
	root = filepath.Join(base, "root")
	mustWrite(t, filepath.Join(base, "secret"), backendtest.PatternBytes("secret", 64))
	mustWrite(t, filepath.Join(root, "dir", "file"), backendtest.PatternBytes("dir/file", 1000))
	for link, target := range map[string]string{
		"rel":         "dir/file",
		"dir/up":      "../dir/file",
		"abs":         filepath.Join(root, "dir", "file"),
		"dirlink":     "dir",
		"absdirlink":  filepath.Join(root, "dir"),
		"dangling":    "nothing/here",
		"escape":      "../secret",
		"absescape":   filepath.Join(base, "secret"),
		"escapedir":   "..",
		"rootescapes": "/",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func newBackend(t *testing.T, root string, noOpenat2 bool) *Backend {
	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	b.noOpenat2.Store(noOpenat2)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestSymlinks(t *testing.T) {
	for _, noOpenat2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "fallback"}[noOpenat2], func(t *testing.T) {
			testSymlinks(t, noOpenat2)
		})
	}
}

func testSymlinks(t *testing.T, noOpenat2 bool) {
	root := linkTree(t)
	b := newBackend(t, root, noOpenat2)
	ctx := t.Context()
	file, err := b.Stat(ctx, "dir/file")
	if err != nil {
		t.Fatal(err)
	}

	// Listed and stat'ed as links, never followed.
	es, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Name == "dir" {
			continue
		}
		want, _ := os.Readlink(filepath.Join(root, e.Name))
		if e.Mode&iofs.ModeSymlink == 0 || e.Target != want || e.Version != "" || e.Size != int64(len(want)) {
			t.Errorf("List entry %+v, want a symlink to %q", e, want)
		}
		st, err := b.Stat(ctx, e.Name)
		if err != nil || st.Mode&iofs.ModeSymlink == 0 || st.Target != want {
			t.Errorf("Stat(%q) = %+v, %v; want the link to %q itself", e.Name, st, err, want)
		}
	}

	// Walk reports links to directories without descending into them.
	var walked []string
	err = b.Walk(ctx, "", func(p string, e backend.Entry) error {
		walked = append(walked, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(walked)
	want := []string{"abs", "absdirlink", "absescape", "dangling", "dir", "dir/file", "dir/up", "dirlink", "escape", "escapedir", "rel", "rootescapes"}
	if !slices.Equal(walked, want) {
		t.Errorf("Walk = %q, want %q", walked, want)
	}

	// ReadAt follows links whose target stays inside the root.
	for _, p := range []string{"rel", "dir/up", "abs", "dirlink/file", "absdirlink/file"} {
		buf := make([]byte, 1000)
		n, err := b.ReadAt(ctx, p, file.Version, buf, 0)
		if n != 1000 || (err != nil && !errors.Is(err, io.EOF)) || !slices.Equal(buf, backendtest.PatternBytes("dir/file", 1000)) {
			t.Errorf("ReadAt(%q) = %d, %v; want the 1000 bytes of dir/file", p, n, err)
		}
	}
	// Listing through a link to a directory inside the root works too.
	if l, err := b.List(ctx, "dirlink"); err != nil || len(l) != 2 {
		t.Errorf("List(dirlink) = %+v, %v; want dir's two entries", l, err)
	}

	// Nothing outside the root is reachable.
	secret, _ := os.Stat(filepath.Join(filepath.Dir(root), "secret"))
	sv := version(secret.Size(), secret.ModTime().UnixNano())
	for _, p := range []string{"escape", "absescape", "escapedir/secret", "rootescapes/etc/passwd", "dangling"} {
		_, err := b.ReadAt(ctx, p, sv, make([]byte, 10), 0)
		if !errors.Is(err, iofs.ErrNotExist) {
			t.Errorf("ReadAt(%q) = %v, want ErrNotExist", p, err)
		}
	}
	for _, p := range []string{"escapedir", "rootescapes", "rootescapes/tmp"} {
		if l, err := b.List(ctx, p); err == nil {
			t.Errorf("List(%q) = %d entries outside the root, want an error", p, len(l))
		}
	}
	if e, err := b.Stat(ctx, "escapedir/secret"); err == nil {
		t.Errorf("Stat(escapedir/secret) = %+v outside the root, want an error", e)
	}
}

func TestSpecialFilesOmitted(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "file"), []byte("x"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, root, false)
	es, err := b.List(t.Context(), "")
	if err != nil || len(es) != 1 || es[0].Name != "file" {
		t.Errorf("List = %+v, %v; want only file", es, err)
	}
	if _, err := b.Stat(t.Context(), "fifo"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Stat(fifo) = %v, want ErrNotExist", err)
	}
	// Opening a FIFO for reading would block without a writer; it must not.
	if _, err := b.ReadAt(t.Context(), "fifo", "", make([]byte, 1), 0); err == nil {
		t.Errorf("ReadAt(fifo): no error")
	}
}

func TestModifiedBeforeAndDuringRead(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "f")
	mustWrite(t, path, backendtest.PatternBytes("f", 4096))
	b := newBackend(t, root, false)
	e, err := b.Stat(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	touch := func() {
		// In place, same size, later mtime: only the version check sees it.
		if err := os.WriteFile(path, backendtest.PatternBytes("g", 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := e.ModTime.Add(time.Second)
		if err := os.Chtimes(path, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	b.testHookAfterRead = func(string) { touch() }
	if _, err := b.ReadAt(t.Context(), "f", e.Version, make([]byte, 100), 0); !errors.Is(err, backend.ErrStale) {
		t.Errorf("ReadAt of a file modified during the read = %v, want ErrStale", err)
	}
	b.testHookAfterRead = nil
	if _, err := b.ReadAt(t.Context(), "f", e.Version, make([]byte, 100), 0); !errors.Is(err, backend.ErrStale) {
		t.Errorf("ReadAt of a file modified before the read = %v, want ErrStale", err)
	}
}
