package stats

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkScaleNew builds the recorder of an ImageNet-sized dataset
// (1,281,167 files) and reports the per-file table's heap bytes per file.
func BenchmarkScaleNew(b *testing.B) {
	var ms runtime.MemStats
	var perFile float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		b.StartTimer()
		r := New(Options{Files: benchFiles, DatasetBytes: benchFiles * 110_000})
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		perFile = float64(ms.HeapAlloc-base) / benchFiles
		runtime.KeepAlive(r)
		b.StartTimer()
	}
	b.ReportMetric(perFile, "heap-B/file")
}

// BenchmarkScaleRead times Read on one goroutine over files spread across
// the whole table, after an epoch touched every row, at 12,811 and
// 1,281,167 files: a read's cost must not grow with the table.
func BenchmarkScaleRead(b *testing.B) {
	for _, n := range []uint32{benchFiles / 100, benchFiles} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			r := New(Options{Files: int(n), DatasetBytes: int64(n) * 110_000})
			for f := range n {
				r.Read(f, Backend, 110_000, time.Millisecond)
			}
			var f uint32
			for b.Loop() {
				r.Read(f, Memory, 110_000, 0)
				f = (f + 7919) % n
			}
		})
	}
}
