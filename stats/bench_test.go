package stats

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchFiles is the ImageNet-1k training set's file count.
const benchFiles = 1_281_167

// BenchmarkRecorderRead measures a cached read (a 64 KiB copy, the shape
// of a memory-tier hit) with the recorder off (nil) and on, from parallel
// readers that each walk their own files, as DataLoader workers do. The
// overhead is (on - off) / off.
func BenchmarkRecorderRead(b *testing.B) {
	for _, tc := range []struct {
		name string
		rec  *Recorder
	}{
		{"off", nil},
		{"on", New(Options{Files: benchFiles, DatasetBytes: benchFiles * 110_000})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			benchReads(b, tc.rec, 64<<10)
		})
	}
}

// BenchmarkRecorderReadOnly measures the Read call alone.
func BenchmarkRecorderReadOnly(b *testing.B) {
	benchReads(b, New(Options{Files: benchFiles, DatasetBytes: benchFiles * 110_000}), 0)
}

func benchReads(b *testing.B, r *Recorder, copyBytes int) {
	var worker atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.SetBytes(int64(copyBytes))
	b.RunParallel(func(pb *testing.PB) {
		src := make([]byte, copyBytes)
		dst := make([]byte, copyBytes)
		f := worker.Add(1) * 100_003 % benchFiles
		for pb.Next() {
			copy(dst, src)
			r.Read(f, Memory, int64(copyBytes)+1, 0)
			if f++; f == benchFiles {
				f = 0
			}
		}
	})
}

// BenchmarkSnapshotTopFiles measures a Snapshot with the top 20 files of
// an ImageNet-sized table in which every file was read.
func BenchmarkSnapshotTopFiles(b *testing.B) {
	r := New(Options{Files: benchFiles, DatasetBytes: benchFiles * 110_000})
	for f := range uint32(benchFiles) {
		r.Read(f, Backend, 110_000, time.Duration(f%1000)*time.Microsecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = r.Snapshot(20)
	}
}

// BenchmarkRecorderOverhead is the on/off comparison made robust against
// a busy machine: one locked thread alternates batches of cached reads
// (64 KiB copies) without and with the recorder, timing each batch with
// the thread's own CPU clock, and reports the medians and their ratio.
func BenchmarkRecorderOverhead(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := New(Options{Files: benchFiles, DatasetBytes: benchFiles * 110_000})
	for id := range uint32(benchFiles) { // steady state: the table's pages are mapped
		r.Read(id, Memory, 1, 0)
	}
	src, dst := make([]byte, 64<<10), make([]byte, 64<<10)
	const batch = 2000
	var f uint32
	run := func(rec *Recorder) float64 {
		t0 := threadCPU(b)
		for range batch {
			copy(dst, src)
			rec.Read(f, Memory, int64(len(dst)), 0)
			if f++; f == benchFiles {
				f = 0
			}
		}
		return float64(threadCPU(b)-t0) / batch
	}
	var off, on []float64
	for b.Loop() {
		off = append(off, run(nil))
		on = append(on, run(r))
	}
	mOff, mOn := median(off), median(on)
	b.ReportMetric(mOff, "ns/read-off")
	b.ReportMetric(mOn, "ns/read-on")
	b.ReportMetric(mOn-mOff, "ns/Read")
	b.ReportMetric(100*(mOn-mOff)/mOff, "%overhead")
}

// threadCPU is the calling thread's CPU time in ns.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
