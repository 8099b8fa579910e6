package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// patByte is the deterministic content of every test file: byte off of a
// file with seed seed.
func patByte(seed, off int64) byte {
	x := uint64(off) + uint64(seed)*0x9E3779B97F4A7C15
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return byte(x)
}

func fillPat(p []byte, seed, off int64) {
	for i := range p {
		p[i] = patByte(seed, off+int64(i))
	}
}

func checkPat(t testing.TB, what string, p []byte, seed, off int64) {
	t.Helper()
	for i, b := range p {
		if want := patByte(seed, off+int64(i)); b != want {
			t.Fatalf("%s: byte %d (offset %d) = %#x, want %#x", what, i, off+int64(i), b, want)
		}
	}
}

// fakeBackend is an in-memory backend of pattern files. Its reads can be
// gated, delayed, failed or cut short, and are counted.
type fakeBackend struct {
	mu    sync.Mutex
	files map[string]int64 // path -> size; content is patByte(len(path), off)

	reads   atomic.Int64  // ReadAt calls
	entered chan string   // if set, receives each ReadAt's path (non-blocking)
	gate    chan struct{} // if set, ReadAt waits for it to close
	delay   time.Duration
	fail    func(path string, off int64) error
	short   bool // return one byte less than asked, without error
}

func newFakeBackend(files map[string]int64) *fakeBackend {
	return &fakeBackend{files: files}
}

func seedOf(p string) int64 { return int64(len(p)) }

func (b *fakeBackend) String() string { return "fake://" }
func (b *fakeBackend) Close() error   { return nil }

func (b *fakeBackend) entries() map[string][]backend.Entry {
	out := map[string][]backend.Entry{"": nil}
	dirs := map[string]bool{"": true}
	for p, size := range b.files {
		dir := path.Dir(p)
		if dir == "." {
			dir = ""
		}
		out[dir] = append(out[dir], backend.Entry{Name: path.Base(p), Mode: 0o644, Size: size, ModTime: time.Unix(1700000000, 5), Version: fmt.Sprint(size)})
		for dir != "" && !dirs[dir] {
			dirs[dir] = true
			parent := path.Dir(dir)
			if parent == "." {
				parent = ""
			}
			out[parent] = append(out[parent], backend.Entry{Name: path.Base(dir), Mode: iofs.ModeDir | 0o755, ModTime: time.Unix(1700000000, 0)})
			dir = parent
		}
	}
	for _, es := range out {
		sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	}
	return out
}

func (b *fakeBackend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	es, ok := b.entries()[dir]
	if !ok {
		return nil, &iofs.PathError{Op: "list", Path: dir, Err: iofs.ErrNotExist}
	}
	return es, nil
}

func (b *fakeBackend) Stat(ctx context.Context, p string) (backend.Entry, error) {
	if p == "" {
		return backend.Entry{Mode: iofs.ModeDir | 0o755}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	dir := path.Dir(p)
	if dir == "." {
		dir = ""
	}
	for _, e := range b.entries()[dir] {
		if e.Name == path.Base(p) {
			return e, nil
		}
	}
	return backend.Entry{}, &iofs.PathError{Op: "stat", Path: p, Err: iofs.ErrNotExist}
}

func (b *fakeBackend) ReadAt(ctx context.Context, p, version string, buf []byte, off int64) (int, error) {
	b.reads.Add(1)
	if b.entered != nil {
		select {
		case b.entered <- p:
		default:
		}
	}
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	if b.fail != nil {
		if err := b.fail(p, off); err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	size, ok := b.files[p]
	b.mu.Unlock()
	if !ok {
		return 0, &iofs.PathError{Op: "read", Path: p, Err: iofs.ErrNotExist}
	}
	if version != fmt.Sprint(size) {
		return 0, fmt.Errorf("read %s: %w", p, backend.ErrStale)
	}
	n := int(max(0, min(int64(len(buf)), size-off)))
	if b.short && n > 0 {
		n--
	}
	fillPat(buf[:n], seedOf(p), off)
	if n < len(buf) && off+int64(n) >= size {
		return n, io.EOF
	}
	return n, nil
}

// walkerBackend adds a flat Walk to fakeBackend, reporting files only (as
// object stores do), so directories must be implied.
type walkerBackend struct{ *fakeBackend }

func (w walkerBackend) Walk(ctx context.Context, dir string, fn func(string, backend.Entry) error) error {
	w.mu.Lock()
	var paths []string
	for p := range w.files {
		paths = append(paths, p)
	}
	w.mu.Unlock()
	for _, p := range paths {
		e, err := w.Stat(ctx, p)
		if err != nil {
			return err
		}
		if err := fn(p, e); err != nil {
			return err
		}
	}
	return nil
}

// fakeCache is a map-backed Cache with a byte budget.
type fakeCache struct {
	mu     sync.Mutex
	items  map[mincache.Key][]byte
	budget int64
	used   int64
	admits int
}

func (c *fakeCache) ReadAt(k mincache.Key, p []byte, off int64) (int, mincache.Tier, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.items[k]
	if !ok || off+int64(len(p)) > int64(len(b)) {
		return 0, mincache.None, false
	}
	return copy(p, b[off:]), mincache.Memory, true
}

func (c *fakeCache) Admit(k mincache.Key, data []byte) mincache.Tier {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admits++
	if c.used+int64(len(data)) > c.budget {
		return mincache.None
	}
	if c.items == nil {
		c.items = map[mincache.Key][]byte{}
	}
	c.items[k] = append([]byte(nil), data...)
	c.used += int64(len(data))
	return mincache.Memory
}

// recorder counts Recorder calls by source.
type recorder struct {
	mu      sync.Mutex
	bytes   [4]int64
	calls   [4]int
	blocked time.Duration
}

func (r *recorder) Read(file uint32, src stats.Source, n int64, blocked time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bytes[src] += n
	r.calls[src]++
	r.blocked += blocked
}

// dirBackend is a minimal backend over a local directory for mount tests
// (backend/local has its own suite). It reports symlinks as symlinks.
type dirBackend struct{ root string }

func (d dirBackend) String() string { return "file://" + d.root }
func (d dirBackend) Close() error   { return nil }

func (d dirBackend) entry(fi iofs.FileInfo, full string) (backend.Entry, error) {
	e := backend.Entry{Name: fi.Name(), Mode: fi.Mode(), ModTime: fi.ModTime()}
	switch {
	case fi.Mode().IsRegular():
		e.Size = fi.Size()
		e.Version = fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
	case fi.Mode()&iofs.ModeSymlink != 0:
		t, err := os.Readlink(full)
		if err != nil {
			return e, err
		}
		e.Target = t
	}
	return e, nil
}

func (d dirBackend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	full := filepath.Join(d.root, filepath.FromSlash(dir))
	des, err := os.ReadDir(full)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Entry, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			return nil, err
		}
		e, err := d.entry(fi, filepath.Join(full, de.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (d dirBackend) Stat(ctx context.Context, p string) (backend.Entry, error) {
	full := filepath.Join(d.root, filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	if err != nil {
		return backend.Entry{}, err
	}
	e, err := d.entry(fi, full)
	if p == "" {
		e.Name = ""
	}
	return e, err
}

func (d dirBackend) ReadAt(ctx context.Context, p, version string, buf []byte, off int64) (int, error) {
	f, err := os.Open(filepath.Join(d.root, filepath.FromSlash(p)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if v := fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano()); v != version {
		return 0, fmt.Errorf("read %s: %w", p, backend.ErrStale)
	}
	return f.ReadAt(buf, off)
}

var errBoom = errors.New("boom")

func fmtInt(n int64) string { return fmt.Sprint(n) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func runtimeGOMAXPROCS() int { return runtime.GOMAXPROCS(0) }
