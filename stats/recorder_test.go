package stats

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// read is one synthetic read.
type read struct {
	file    uint32
	src     Source
	n       int64
	blocked time.Duration
}

func TestAccountingSums(t *testing.T) {
	const files = 500
	r := New(Options{Files: files, DatasetBytes: files * 1000})
	rng := rand.New(rand.NewPCG(1, 2))
	var want [numSources]int64
	var wantReads [numSources]int64
	var wantStall time.Duration
	perFile := make([]int64, files)
	perFileStall := make([]time.Duration, files)
	for range 20000 {
		rd := read{file: uint32(rng.IntN(files)), src: Source(rng.IntN(int(numSources))), n: rng.Int64N(1 << 20)}
		if rd.src == Backend || rd.src == Peer {
			rd.blocked = time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
		}
		r.Read(rd.file, rd.src, rd.n, rd.blocked)
		want[rd.src] += rd.n
		wantReads[rd.src]++
		wantStall += rd.blocked
		perFile[rd.file] += rd.n
		perFileStall[rd.file] += rd.blocked
	}
	s := r.Snapshot(files)
	got := s.Totals.BytesBySource
	if got != bySource(want) {
		t.Fatalf("bytes by source = %+v, want %+v", got, bySource(want))
	}
	if s.Totals.ReadsBySource != bySource(wantReads) {
		t.Fatalf("reads by source = %+v, want %+v", s.Totals.ReadsBySource, bySource(wantReads))
	}
	if sum := got.Memory + got.Disk + got.Peer + got.Backend; sum != s.Totals.Bytes {
		t.Fatalf("bytes by source sum to %d, totals.bytes = %d", sum, s.Totals.Bytes)
	}
	if s.Totals.Reads != 20000 {
		t.Fatalf("reads = %d, want 20000", s.Totals.Reads)
	}
	if d := s.Totals.FetchStallSeconds - wantStall.Seconds(); d > 1e-6 || d < -1e-6 {
		t.Fatalf("stall = %v, want %v", s.Totals.FetchStallSeconds, wantStall.Seconds())
	}
	var epochBytes int64
	for _, e := range s.Epochs {
		epochBytes += e.Bytes
	}
	if epochBytes != s.Totals.Bytes {
		t.Fatalf("epoch bytes sum to %d, totals.bytes = %d", epochBytes, s.Totals.Bytes)
	}
	if len(s.Files) != files {
		t.Fatalf("files = %d rows, want %d", len(s.Files), files)
	}
	for i, f := range s.Files {
		if f.Bytes != perFile[f.ID] {
			t.Fatalf("file %d bytes = %d, want %d", f.ID, f.Bytes, perFile[f.ID])
		}
		if d := f.StallSeconds - perFileStall[f.ID].Seconds(); d > 1e-9 || d < -1e-9 {
			t.Fatalf("file %d stall = %v, want %v", f.ID, f.StallSeconds, perFileStall[f.ID].Seconds())
		}
		if i > 0 && f.StallSeconds > s.Files[i-1].StallSeconds {
			t.Fatalf("files not ordered by stall: %v after %v", f.StallSeconds, s.Files[i-1].StallSeconds)
		}
	}
}

func TestMemoryHitsDoNotStall(t *testing.T) {
	r := New(Options{Files: 10})
	for i := range 100 {
		r.Read(uint32(i%10), Memory, 4096, 0)
		r.Read(uint32(i%10), Disk, 4096, 0)
	}
	s := r.Snapshot(3)
	if s.Totals.FetchStallSeconds != 0 || s.Totals.StallWallSeconds != 0 {
		t.Fatalf("stall = %v / %v for cache hits, want 0", s.Totals.FetchStallSeconds, s.Totals.StallWallSeconds)
	}
	if s.Totals.HitRate != 1 {
		t.Fatalf("hit rate = %v, want 1", s.Totals.HitRate)
	}
	if s.Totals.LatencyP99Seconds != 0 || s.Totals.LatencyMaxSeconds != 0 {
		t.Fatalf("latency p99/max = %v/%v, want 0", s.Totals.LatencyP99Seconds, s.Totals.LatencyMaxSeconds)
	}
	for _, f := range s.Files {
		if f.StallSeconds != 0 || f.FirstFetchEpoch != nil {
			t.Fatalf("file %+v: stall or first fetch set by cache hits", f)
		}
	}
}

func TestFileSourcesAndFirstFetch(t *testing.T) {
	r := New(Options{Files: 4, PathOf: func(id uint32) string { return []string{"a", "b", "c", "d"}[id] }})
	r.SetEpoch(3)
	r.Read(1, Backend, 10, time.Millisecond)
	r.SetEpoch(4)
	r.Read(1, Memory, 10, 0)
	r.Prefetched(2, 99)
	s := r.Snapshot(4)
	if len(s.Files) != 1 {
		t.Fatalf("files = %+v, want only b (prefetch is not a read)", s.Files)
	}
	f := s.Files[0]
	if f.Path != "b" || f.Source != "memory" || len(f.Sources) != 2 || f.Sources[0] != "memory" || f.Sources[1] != "backend" {
		t.Fatalf("file row = %+v, want b, last memory, sources memory+backend", f)
	}
	if f.FirstFetchEpoch == nil || *f.FirstFetchEpoch != 3 {
		t.Fatalf("first fetch epoch = %v, want 3", f.FirstFetchEpoch)
	}
	if ep := r.fileRow(2).FirstFetchEpoch; ep == nil || *ep != 4 {
		t.Fatalf("prefetched file's first fetch epoch = %v, want 4", ep)
	}
}

func TestBackendAndPrefetchCounters(t *testing.T) {
	r := New(Options{})
	r.BackendRequest(nil, false)
	r.BackendRequest(errors.New("boom"), false)
	r.BackendRequest(nil, true)
	r.Prefetched(0, 100)
	r.PrefetchHit(0, 60)
	r.Read(0, Memory, 60, 0)
	r.Read(1, Backend, 40, time.Millisecond)
	r.Read(1, Backend, 40, 0) // a later part of the fetched item: no wait
	s := r.Snapshot(0)
	if got := s.WhatIf.Inputs.BackendRate; !near(got, 80/0.001) {
		t.Fatalf("backend rate = %v, want 80 bytes over the 1 ms waited", got)
	}
	if s.Backend != (BackendStats{Requests: 3, Errors: 1, Retries: 1}) {
		t.Fatalf("backend = %+v", s.Backend)
	}
	want := Prefetch{FetchedItems: 1, FetchedBytes: 100, HiddenMisses: 1, HiddenBytes: 60, NotHiddenMisses: 1}
	if s.Prefetch != want {
		t.Fatalf("prefetch = %+v, want %+v", s.Prefetch, want)
	}
	if s.Files != nil {
		t.Fatalf("files = %+v without topFiles", s.Files)
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Read(1, Memory, 1, 0)
	r.Prefetched(1, 1)
	r.PrefetchHit(1, 1)
	r.BackendRequest(nil, false)
	r.SetEpoch(2)
	if s := r.Snapshot(1); s.SchemaVersion != SchemaVersion || s.Totals.Reads != 0 {
		t.Fatalf("nil snapshot = %+v", s)
	}
}

// TestStallTiming checks durations, the union of blocked intervals and the
// stall share with a fake clock.
func TestStallTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Files: 4, DatasetBytes: 4000, CacheBytes: 2000})
		t0 := time.Now()
		r.Read(0, Memory, 1000, 0) // the epoch starts here
		time.Sleep(2 * time.Second)
		// Two readers blocked 1 s each, overlapping by 0.5 s: 1.5 s of wall stall.
		time.Sleep(500 * time.Millisecond)
		r.Read(1, Backend, 1000, time.Second)
		time.Sleep(500 * time.Millisecond)
		r.Read(2, Backend, 1000, time.Second)
		time.Sleep(time.Second)
		r.Read(3, Memory, 1000, 0) // full pass: epoch 1 ends at t0+4s
		time.Sleep(10 * time.Second)
		r.Read(0, Memory, 1000, 0) // epoch 2 starts at t0+14s
		time.Sleep(time.Second)
		s := r.Snapshot(0)
		if len(s.Epochs) != 2 {
			t.Fatalf("epochs = %+v, want 2", s.Epochs)
		}
		e := s.Epochs[0]
		if !e.Start.Equal(t0) || e.Seconds != 4 || !e.Complete || e.EndReason != "full_pass" {
			t.Fatalf("epoch 1 start %v seconds %v complete %v reason %q, want %v, 4, full_pass", e.Start, e.Seconds, e.Complete, e.EndReason, t0)
		}
		if e.FetchStallSeconds != 2 || e.StallWallSeconds != 1.5 || e.StallShare != 1.5/4 {
			t.Fatalf("epoch 1 stall %v wall %v share %v, want 2, 1.5, 0.375", e.FetchStallSeconds, e.StallWallSeconds, e.StallShare)
		}
		if e.HitRate != 0.5 || e.OptimalHitRate != 0 {
			t.Fatalf("epoch 1 hit %v optimal %v, want 0.5, 0 (cold cache)", e.HitRate, e.OptimalHitRate)
		}
		if e.LatencyMaxSeconds != 1 || e.LatencyP50Seconds != 0 || e.LatencyP99Seconds != 1 {
			t.Fatalf("epoch 1 latency p50 %v p99 %v max %v, want 0, 1 (bucket bound capped by max), 1", e.LatencyP50Seconds, e.LatencyP99Seconds, e.LatencyMaxSeconds)
		}
		o := s.Epochs[1]
		if o.Complete || !o.Start.Equal(t0.Add(14*time.Second)) || o.Seconds != 1 || o.OptimalHitRate != 0.5 || o.LatencyMaxSeconds != 0 {
			t.Fatalf("epoch 2 = %+v, want open, started at +14s, 1 s, optimal 0.5, max 0", o)
		}
		// S: 2000 backend bytes over 1.5 s of backend wait; C: 3000 cached bytes over 5-1.5 s.
		in := s.WhatIf.Inputs
		if in.BackendRate != 2000/1.5 || in.CacheRate != 3000/3.5 {
			t.Fatalf("rates C %v S %v, want %v %v", in.CacheRate, in.BackendRate, 3000/3.5, 2000/1.5)
		}
		if in.ConsumerRate != 4000/2.5 {
			t.Fatalf("consumer rate %v, want %v", in.ConsumerRate, 4000/2.5)
		}
	})
}

// TestConcurrentReads hammers the recorder from many goroutines (run with
// -race) and checks that nothing is lost.
func TestConcurrentReads(t *testing.T) {
	const files, workers, per = 1000, 16, 2000
	reg := prometheus.NewRegistry()
	r := New(Options{Registry: reg, Files: files, DatasetBytes: files * 10})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() { // scrape while reading
		n := 0
		for {
			select {
			case <-stop:
				scraped <- n
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				f := uint32((w*63 + i) % files)
				src := Source(i % int(numSources))
				var b time.Duration
				if src == Backend {
					b = time.Microsecond
				}
				r.Read(f, src, 10, b)
				if i%500 == 0 {
					_ = r.Snapshot(5)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if n := <-scraped; n == 0 {
		t.Error("no scrape ran concurrently")
	}
	s := r.Snapshot(files)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var scrapedBytes float64
	for _, mf := range mfs {
		if mf.GetName() == "stallfs_read_bytes_total" {
			for _, m := range mf.GetMetric() {
				scrapedBytes += m.GetCounter().GetValue()
			}
		}
	}
	if int64(scrapedBytes) != s.Totals.Bytes {
		t.Fatalf("scraped %v bytes, snapshot %d", scrapedBytes, s.Totals.Bytes)
	}
	if s.Totals.Reads != workers*per || s.Totals.Bytes != workers*per*10 {
		t.Fatalf("reads %d bytes %d, want %d %d", s.Totals.Reads, s.Totals.Bytes, workers*per, workers*per*10)
	}
	var reads, bytes int64
	for _, f := range s.Files {
		reads += f.Reads
		bytes += f.Bytes
	}
	if reads != workers*per || bytes != workers*per*10 {
		t.Fatalf("per-file reads %d bytes %d, want %d %d", reads, bytes, workers*per, workers*per*10)
	}
	var epochBytes int64
	for _, e := range s.Epochs {
		epochBytes += e.Bytes
	}
	if epochBytes != s.Totals.Bytes {
		t.Fatalf("epochs sum to %d bytes, totals %d", epochBytes, s.Totals.Bytes)
	}
	// 32 passes over the files by 16 interleaved readers: the detector sees
	// some epochs, not one per read and not none.
	if n := len(s.Epochs); n < 8 || n > 64 {
		t.Fatalf("%d epochs detected, want 8..64", n)
	}
}
