package stats

import (
	"sync/atomic"
	"testing"
	"time"
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
