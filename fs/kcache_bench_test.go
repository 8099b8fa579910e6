package fs

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stallfs/stallfs/mincache"
)

// BenchmarkKernelCacheSmallFiles compares the hit paths for ~110 KB files
// that a memory tier holds, 16 readers, in files/s: page-cache reads of
// the source (direct), direct I/O through the mount, and the kernel-cache
// mode with the file entry timeout at 0 (one LOOKUP per open: the default)
// and at one hour (no request at all once the pages are kept).
//
//	go test ./fs -run '^$' -bench KernelCacheSmallFiles -benchtime 20000x
func BenchmarkKernelCacheSmallFiles(b *testing.B) {
	src := b.TempDir()
	const n, size = 512, 110_000
	paths := writeBenchFiles(b, src, n, size)
	read := func(b *testing.B, root string) {
		for _, p := range paths { // warm: tier, kept pages, page cache
			if _, err := os.ReadFile(filepath.Join(root, p)); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		b.SetBytes(size)
		b.SetParallelism(16 / max(1, testingProcs()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 2*size)
			for pb.Next() {
				p := paths[next.Add(1)%int64(len(paths))]
				f, err := os.Open(filepath.Join(root, p))
				if err != nil {
					b.Error(err)
					return
				}
				m, err := f.Read(buf)
				f.Close()
				if err != nil || m != size {
					b.Errorf("%s: %d bytes, %v", p, m, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
	}
	mount := func(b *testing.B, opts Options) string {
		c, err := mincache.Open(mincache.Options{MemBytes: 2 * n * size, Source: src})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		opts.Cache = c
		return benchMount(b, src, opts)
	}
	b.Run("direct", func(b *testing.B) { read(b, src) })
	b.Run("direct-io", func(b *testing.B) { read(b, mount(b, Options{})) })
	b.Run("kernel-cache-entry-0", func(b *testing.B) { read(b, mount(b, Options{KernelCache: true})) })
	b.Run("kernel-cache-entry-1h", func(b *testing.B) {
		read(b, mount(b, Options{KernelCache: true, KernelCacheEntryTimeout: time.Hour}))
	})
}
