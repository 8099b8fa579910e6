package local

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
)

// fixture writes objects as files under root; a replacement is written
// under tmp and renamed over the old file, with its mtime moved past the
// old one so the version changes within the file system's granularity.
type fixture struct {
	root, tmp string
	noOpenat2 bool
}

func newFixture(t *testing.T, noOpenat2 bool) *fixture {
	base := t.TempDir()
	f := &fixture{root: filepath.Join(base, "root"), tmp: filepath.Join(base, "tmp"), noOpenat2: noOpenat2}
	for _, d := range []string{f.root, f.tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) Put(t testing.TB, path string, data []byte) {
	t.Helper()
	dst := filepath.Join(f.root, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(f.tmp, "put")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if old, err := os.Stat(dst); err == nil {
		now, err := os.Stat(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if !now.ModTime().After(old.ModTime()) {
			mt := old.ModTime().Add(time.Millisecond)
			if err := os.Chtimes(tmp, mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) Backend(t testing.TB) backend.Backend {
	t.Helper()
	b, err := New(f.root)
	if err != nil {
		t.Fatal(err)
	}
	b.noOpenat2.Store(f.noOpenat2)
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture { return newFixture(t, false) })
}

// TestConformanceWithoutOpenat2 runs the suite on the resolving fallback
// used by kernels older than 5.6.
func TestConformanceWithoutOpenat2(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture { return newFixture(t, true) })
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(filepath.Join(dir, "missing")); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("New(missing) = %v, want ErrNotExist", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(file); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("New(file) = %v, want ENOTDIR", err)
	}
	b, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "file://"+dir; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(t.Context(), ""); !errors.Is(err, iofs.ErrClosed) {
		t.Errorf("Stat after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
