package local

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
)

// benchTree writes dirs x files files of size bytes and returns the root and
// the relative paths.
func benchTree(b *testing.B, dirs, files, size int) (string, []string) {
	root := b.TempDir()
	var paths []string
	for d := range dirs {
		for f := range files {
			p := fmt.Sprintf("train/n%08d/n%08d_%d.JPEG", d, d, f)
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(full, backendtest.PatternBytes(p, size), 0o644); err != nil {
				b.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	return root, paths
}

// BenchmarkReadSmallFile reads whole 110 KiB files (page cache warm): open,
// fstat, pread, fstat, close per ReadAt. Compare with BenchmarkOSReadFile.
func BenchmarkReadSmallFile(b *testing.B) {
	root, paths := benchTree(b, 4, 250, 110<<10)
	be := newBenchBackend(b, root)
	versions := make([]string, len(paths))
	for i, p := range paths {
		e, err := be.Stat(b.Context(), p)
		if err != nil {
			b.Fatal(err)
		}
		versions[i] = e.Version
	}
	buf := make([]byte, 110<<10)
	b.SetBytes(110 << 10)
	i := 0
	for b.Loop() {
		if _, err := be.ReadAt(b.Context(), paths[i], versions[i], buf, 0); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % len(paths)
	}
}

// BenchmarkOSReadFile is the baseline: os.ReadFile of the same files.
func BenchmarkOSReadFile(b *testing.B) {
	root, paths := benchTree(b, 4, 250, 110<<10)
	b.SetBytes(110 << 10)
	i := 0
	for b.Loop() {
		if _, err := os.ReadFile(filepath.Join(root, paths[i])); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % len(paths)
	}
}

// BenchmarkReadAtOverhead reads 1 byte per ReadAt: the cost of the open,
// the two version checks and the close, which a cache of open descriptors
// would save (per chunk of a large file; a small file is read once).
func BenchmarkReadAtOverhead(b *testing.B) {
	root, paths := benchTree(b, 1, 1, 1<<20)
	be := newBenchBackend(b, root)
	e, err := be.Stat(b.Context(), paths[0])
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1)
	for b.Loop() {
		if _, err := be.ReadAt(b.Context(), paths[0], e.Version, buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalk walks 100 directories of 200 files and reports entries/s.
func BenchmarkWalk(b *testing.B) {
	root, paths := benchTree(b, 100, 200, 0)
	be := newBenchBackend(b, root)
	for b.Loop() {
		n := 0
		err := be.Walk(b.Context(), "", func(string, backend.Entry) error { n++; return nil })
		if err != nil || n != len(paths)+101 {
			b.Fatalf("Walk: %d entries, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N*(len(paths)+101))/b.Elapsed().Seconds(), "entries/s")
}

func newBenchBackend(b *testing.B, root string) *Backend {
	be, err := New(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}
