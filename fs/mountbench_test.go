package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stallfs/stallfs/mincache"
)

// writeBenchFiles writes n files of size bytes (fillPat content, seed =
// index) below src in 16 class directories, "cNN/fNNNN.jpg", and returns
// their relative paths.
func writeBenchFiles(b *testing.B, src string, n, size int) []string {
	b.Helper()
	buf := make([]byte, size)
	var paths []string
	for i := range n {
		p := fmt.Sprintf("c%02d/f%04d.jpg", i%16, i)
		fillPat(buf, int64(i), 0)
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), buf, 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// BenchmarkMountSmallFiles reads ~110 KB files with 16 readers, directly
// from the source directory (page cache warm) and through a mount without
// a cache (each read fetches from the source) and with a warm mincache
// memory tier. It reports files/s.
func BenchmarkMountSmallFiles(b *testing.B) {
	src := b.TempDir()
	const n, size = 512, 110_000
	paths := writeBenchFiles(b, src, n, size)
	read := func(b *testing.B, root string) {
		var next atomic.Int64
		b.SetBytes(size)
		b.SetParallelism(16 / max(1, testingProcs()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p := paths[next.Add(1)%int64(len(paths))]
				data, err := os.ReadFile(filepath.Join(root, p))
				if err != nil || len(data) != size {
					b.Errorf("%s: %d bytes, %v", p, len(data), err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
	}
	b.Run("direct", func(b *testing.B) {
		for _, p := range paths { // warm the page cache
			os.ReadFile(filepath.Join(src, p))
		}
		read(b, src)
	})
	b.Run("stallfs-nocache", func(b *testing.B) {
		mnt := benchMount(b, src, Options{})
		read(b, mnt)
	})
	b.Run("stallfs-mincache", func(b *testing.B) {
		c, err := mincache.Open(mincache.Options{MemBytes: 2 * n * size, Source: src})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		mnt := benchMount(b, src, Options{Cache: c})
		for _, p := range paths { // warm the cache
			os.ReadFile(filepath.Join(mnt, p))
		}
		read(b, mnt)
	})
}

func testingProcs() int { return runtimeGOMAXPROCS() }

func benchMount(b *testing.B, src string, opts Options) string {
	mnt := filepath.Join(b.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	opts.ControlSocket = filepath.Join(b.TempDir(), "c.sock")
	m, err := New(b.Context(), mnt, dirBackend{root: src}, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Unmount() })
	return mnt
}
