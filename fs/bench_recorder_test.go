package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// The accounting's budget is 3% of cached-read throughput. The machine
// that runs these benchmarks is shared, so wall time is noise: both
// benchmarks alternate batches with the recorder off and on and compare
// the median CPU time per read of each (the reading thread's in process;
// the whole process's through a mount, whose server runs in it).

// ImageNet-1k's training set: the file table's size.
const benchImageNetFiles = 1_281_167

// newBenchRecorder returns a recorder as the pipeline builds it for files
// of size bytes, in steady state: every file read once (epoch 1 touched
// the table's pages).
func newBenchRecorder(files int, size int64, sizeOf func(uint32) int64) *stats.Recorder {
	rec := stats.New(stats.Options{Files: files, DatasetBytes: int64(files) * size, CacheBytes: 64 << 20, SizeOf: sizeOf})
	for id := range uint32(files) {
		rec.Read(id, stats.Memory, size, 0)
	}
	return rec
}

// BenchmarkReadPathRecorder measures cached reads (the mincache memory
// tier) through the in-process item read path with the recorder off (nil)
// and on (a stats.Recorder over ImageNet-1k's file count with SizeOf).
// Successive reads go to successive file IDs, so every read completes its
// file's epoch bytes and a pass closes an epoch.
func BenchmarkReadPathRecorder(b *testing.B) {
	const files = benchImageNetFiles
	for _, size := range []int{4 << 10, 110_000} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c, err := mincache.Open(mincache.Options{MemBytes: 64 << 20, Source: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			key := mincache.Key{Path: "train/n01440764/img.JPEG", Version: "v1"}
			if c.Admit(key, make([]byte, size)) == mincache.None {
				b.Fatal("cache did not admit the item")
			}
			off := benchReader(b, readerOptions{cache: c})
			on := benchReader(b, readerOptions{cache: c,
				recorder: newBenchRecorder(files, int64(size), func(uint32) int64 { return int64(size) })})
			f := &fileRef{path: key.Path, version: key.Version, size: int64(size)}
			buf := make([]byte, size)
			var id uint32
			const batch = 1000
			run := func(r *reader) float64 {
				t0 := threadCPU(b)
				for range batch {
					f.id = id
					if id++; id == files {
						id = 0
					}
					if n, err := r.read(context.Background(), f, nil, buf, 0); err != nil || n != size {
						b.Fatalf("read: %d, %v", n, err)
					}
				}
				return float64(threadCPU(b)-t0) / batch
			}
			var offNs, onNs []float64
			for b.Loop() {
				offNs = append(offNs, run(off))
				onNs = append(onNs, run(on))
			}
			reportOverhead(b, offNs, onNs, "read")
		})
	}
}

// BenchmarkMountCachedRecorder reads 110 KB files through two real mounts
// of one dataset, both from a warm mincache memory tier, one with the
// recorder off and one on, in alternating batches with 8 readers: the
// accounting's cost on cached-read throughput as a loader sees it.
func BenchmarkMountCachedRecorder(b *testing.B) {
	src := b.TempDir()
	const n, size = 256, 110_000
	paths := writeBenchFiles(b, src, n, size)
	mount := func(on bool) string {
		c, err := mincache.Open(mincache.Options{MemBytes: 2 * n * size, Source: src})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		opts := Options{Cache: c}
		if on {
			opts.BeforeMount = func(m *Mount) error {
				m.SetRecorder(newBenchRecorder(m.Files(), size, m.SizeOf))
				return nil
			}
		}
		mnt := benchMount(b, src, opts)
		for _, p := range paths { // warm the cache
			if _, err := os.ReadFile(filepath.Join(mnt, p)); err != nil {
				b.Fatal(err)
			}
		}
		return mnt
	}
	off, on := mount(false), mount(true)
	const readers = 8
	run := func(mnt string) float64 {
		t0 := processCPU(b)
		var wg sync.WaitGroup
		for w := range readers {
			wg.Go(func() {
				for i := w; i < len(paths); i += readers {
					data, err := os.ReadFile(filepath.Join(mnt, paths[i]))
					if err != nil || len(data) != size {
						b.Errorf("%s: %d bytes, %v", paths[i], len(data), err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(processCPU(b)-t0) / float64(len(paths))
	}
	var offNs, onNs []float64
	for b.Loop() {
		offNs = append(offNs, run(off))
		onNs = append(onNs, run(on))
	}
	reportOverhead(b, offNs, onNs, "file")
}

// reportOverhead reports the median CPU ns per unit with the recorder off
// and on and the overhead in percent.
func reportOverhead(b *testing.B, off, on []float64, unit string) {
	mOff, mOn := benchMedian(off), benchMedian(on)
	b.ReportMetric(mOff, "cpu-ns/"+unit+"-off")
	b.ReportMetric(mOn, "cpu-ns/"+unit+"-on")
	b.ReportMetric(100*(mOn-mOff)/mOff, "%overhead")
}

func benchMedian(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// threadCPU is the calling thread's CPU time in ns.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// processCPU is the process's CPU time in ns (every thread, the FUSE
// server's included).
func processCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}
