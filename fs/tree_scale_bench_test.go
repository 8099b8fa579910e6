package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
)

// ImageNet-1k's training set: 1,281,167 files in 1,000 class directories.
const (
	imagenetFiles   = 1_281_167
	imagenetClasses = 1000
)

// imagenetListing is an in-memory listing of files files spread over
// classes directories under train/, named and versioned like the local
// backend's entries of the real dataset ("train/n01440764/n01440764_10026.JPEG",
// version "<size hex>-<mtime ns hex>").
func imagenetListing(files, classes int) map[string][]backend.Entry {
	mtime := time.Unix(1_700_000_000, 0)
	out := map[string][]backend.Entry{"": {{Name: "train", Mode: iofs.ModeDir | 0o755, ModTime: mtime}}}
	var dirs []backend.Entry
	for c := range classes {
		class := fmt.Sprintf("n%08d", 1_440_764+c*7)
		dirs = append(dirs, backend.Entry{Name: class, Mode: iofs.ModeDir | 0o755, ModTime: mtime})
		n := files / classes
		if c < files%classes {
			n++
		}
		ents := make([]backend.Entry, n)
		for i := range ents {
			size := int64(110_000 + (c*131+i*17)%90_000)
			mt := mtime.Add(time.Duration(c*n+i) * time.Microsecond)
			ents[i] = backend.Entry{
				Name:    class + "_" + strconv.Itoa(i*7+3) + ".JPEG",
				Mode:    0o644,
				Size:    size,
				ModTime: mt,
				Version: strconv.FormatInt(size, 16) + "-" + strconv.FormatInt(mt.UnixNano(), 16),
			}
		}
		out["train/"+class] = ents
	}
	out["train"] = dirs
	return out
}

// heapBytes is the memory the tree holds: its arrays at capacity and the
// arena.
func (t *tree) heapBytes() int64 {
	const entSize, dirSize, srefSize = 40, 16, 8
	return int64(cap(t.ents))*entSize + int64(cap(t.dirs))*dirSize + int64(cap(t.fileEnt))*4 +
		int64(cap(t.fileVer)+cap(t.links))*srefSize + int64(len(t.strs))
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func buildImagenet(tb testing.TB, files int) *tree {
	tb.Helper()
	t, err := buildTree(backend.Entry{Mode: iofs.ModeDir | 0o755}, imagenetListing(files, imagenetClasses))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// TestTreeBytesPerFile keeps the tree under 200 bytes per file (issue 10)
// at a twentieth of ImageNet, counted both from the tree's arrays and as live
// heap after loading it from a metadata file.
func TestTreeBytesPerFile(t *testing.T) {
	const files = imagenetFiles / 20
	tr := buildImagenet(t, files)
	if got := float64(tr.heapBytes()) / files; got >= 200 {
		t.Errorf("tree holds %.0f B/file, want < 200", got)
	}
	name := filepath.Join(t.TempDir(), "tree")
	if err := saveTree(name, "bench://imagenet", 0, tr); err != nil {
		t.Fatal(err)
	}
	tr = nil
	before := liveHeap()
	tf, err := loadTree(name, "bench://imagenet")
	if err != nil {
		t.Fatal(err)
	}
	live := float64(liveHeap()-before) / files
	runtime.KeepAlive(tf)
	if live >= 200 {
		t.Errorf("loaded tree: %.0f B/file of live heap, want < 200", live)
	}
	t.Logf("%.0f B/file of live heap (arrays %.0f)", live, float64(tf.t.heapBytes())/files)
}

// BenchmarkTreeSaveImageNet writes the metadata file of 1,281,167 files.
func BenchmarkTreeSaveImageNet(b *testing.B) {
	tr := buildImagenet(b, imagenetFiles)
	name := filepath.Join(b.TempDir(), "tree")
	for b.Loop() {
		if err := saveTree(name, "bench://imagenet", 0, tr); err != nil {
			b.Fatal(err)
		}
	}
	if fi, err := os.Stat(name); err == nil {
		b.ReportMetric(float64(fi.Size())/imagenetFiles, "file-B/file")
	}
}

// BenchmarkTreeLoadImageNet loads and checks the metadata file of
// 1,281,167 files: what a remount of an unchanged source does instead of
// listing it.
func BenchmarkTreeLoadImageNet(b *testing.B) {
	name := filepath.Join(b.TempDir(), "tree")
	if err := saveTree(name, "bench://imagenet", 0, buildImagenet(b, imagenetFiles)); err != nil {
		b.Fatal(err)
	}
	before := liveHeap()
	var tf *persistedTree
	for b.Loop() {
		var err error
		if tf, err = loadTree(name, "bench://imagenet"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(liveHeap()-before)/imagenetFiles, "live-B/file")
	runtime.KeepAlive(tf)
}

// BenchmarkTreeLookupImageNet resolves a file path (two binary searches:
// 1,000 classes, ~1,281 files) the way LOOKUP does, name by name.
func BenchmarkTreeLookupImageNet(b *testing.B) {
	tr := buildImagenet(b, imagenetFiles)
	paths := make([]string, 4096)
	for i := range paths {
		paths[i] = tr.pathOf(tr.fileEnt[(i*7919)%tr.files()])
	}
	i := 0
	for b.Loop() {
		if _, ok := tr.lookupPath(paths[i%len(paths)]); !ok {
			b.Fatal("not found")
		}
		i++
	}
}

// listingBackend serves a fixed listing (metadata only; reads fail).
type listingBackend struct{ listing map[string][]backend.Entry }

func (l listingBackend) String() string { return "listing://" }
func (l listingBackend) Close() error   { return nil }
func (l listingBackend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	es, ok := l.listing[dir]
	if !ok {
		return nil, &iofs.PathError{Op: "list", Path: dir, Err: iofs.ErrNotExist}
	}
	return es, nil
}
func (l listingBackend) Stat(ctx context.Context, p string) (backend.Entry, error) {
	if p == "" {
		return backend.Entry{Mode: iofs.ModeDir | 0o755}, nil
	}
	return backend.Entry{}, &iofs.PathError{Op: "stat", Path: p, Err: iofs.ErrNotExist}
}
func (l listingBackend) ReadAt(ctx context.Context, p, v string, buf []byte, off int64) (int, error) {
	return 0, &iofs.PathError{Op: "read", Path: p, Err: iofs.ErrPermission}
}

// BenchmarkFindMount runs `find MNT -type f | wc -l` through a mount of an
// ImageNet-shaped listing (BENCH_FIND_FILES files, default 128,117: a
// tenth) and reports files/s; run it with -cpuprofile to see the daemon's
// side (it serves from this process).
func BenchmarkFindMount(b *testing.B) {
	files := imagenetFiles / 10
	if v, err := strconv.Atoi(os.Getenv("BENCH_FIND_FILES")); err == nil && v > 0 {
		files = v
	}
	mnt := filepath.Join(b.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	m, err := New(b.Context(), mnt, listingBackend{imagenetListing(files, imagenetClasses)},
		Options{ControlSocket: filepath.Join(b.TempDir(), "c.sock")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Unmount() })
	for b.Loop() {
		out, err := exec.Command("sh", "-c", "find "+mnt+" -type f | wc -l").Output()
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n != files {
			b.Fatalf("find counted %d files, want %d", n, files)
		}
	}
	b.ReportMetric(float64(files)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
}
