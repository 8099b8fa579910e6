package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"runtime"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/mincache"
)

// nullBackend answers every read instantly without touching the bytes, so
// the benchmark measures the read path, not the fake.
type nullBackend struct{ *fakeBackend }

func (nullBackend) ReadAt(ctx context.Context, p, version string, buf []byte, off int64) (int, error) {
	clear(buf)
	return len(buf), nil
}

// BenchmarkReadPath measures one FUSE-sized read through the item read
// path, in process: a cache hit, a full backend fill (instant backend),
// and a sequential 1 MiB read of a large file with readahead (each 4 MiB
// chunk filled once, its other parts served from the recent buffer).
func BenchmarkReadPath(b *testing.B) {
	const small = 110_000
	f := &fileRef{id: 1, path: "train/n01440764/img.JPEG", version: "v1", size: small}
	run := func(b *testing.B, r *reader, f *fileRef, size int) {
		buf := make([]byte, size)
		ctx := context.Background()
		b.SetBytes(int64(size))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if _, err := r.read(ctx, f, nil, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("cache-hit-110KB", func(b *testing.B) {
		c := &fakeCache{budget: 1 << 30}
		c.Admit(mincache.Key{Path: f.path, Version: f.version}, make([]byte, small))
		r := benchReader(b, readerOptions{cache: c, recorder: &recorder{}})
		run(b, r, f, small)
	})
	b.Run("fill-110KB", func(b *testing.B) {
		r := benchReader(b, readerOptions{buffer: 1})
		run(b, r, f, small)
	})
	b.Run("sequential-1MiB-reads", func(b *testing.B) {
		// Large enough never to wrap: the null backend has no data.
		big := &fileRef{id: 2, path: "shards/shard-000.tar", version: "v", size: 1 << 50}
		r := benchReader(b, readerOptions{readahead: 2, buffer: 64 << 20})
		buf := make([]byte, 1<<20)
		ctx := context.Background()
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		seq := newSeqState()
		off := int64(0)
		for b.Loop() {
			if _, err := r.read(ctx, big, seq, buf, off); err != nil {
				b.Fatal(err)
			}
			off += int64(len(buf))
		}
	})
}

func benchReader(b *testing.B, o readerOptions) *reader {
	o.chunk, o.maxFills, o.retries = 4<<20, 64, 3
	if o.buffer == 0 {
		o.buffer = 64 << 20
	}
	o.log = nil
	r := testReaderB(b, nullBackend{newFakeBackend(nil)}, o)
	return r
}

func testReaderB(b *testing.B, be nullBackend, o readerOptions) *reader {
	ctx, cancel := context.WithCancel(context.Background())
	if o.log == nil {
		o.log = discardLogger()
	}
	r := newReader(ctx, be, o)
	b.Cleanup(func() { cancel(); r.close() })
	return r
}

// BenchmarkBuildTreeImageNet lays out an ImageNet-1k-shaped listing (1000
// class directories of 1281 files) and reports the tree's retained heap
// per file.
func BenchmarkBuildTreeImageNet(b *testing.B) {
	const classes, per = 1000, 1281
	mk := func() map[string][]backend.Entry {
		listing := map[string][]backend.Entry{"": nil}
		mt := time.Unix(1700000000, 123)
		for c := range classes {
			dir := fmt.Sprintf("n%08d", 1440764+c*37)
			listing[""] = append(listing[""], backend.Entry{Name: dir, Mode: iofs.ModeDir | 0o755, ModTime: mt})
			es := make([]backend.Entry, per)
			for i := range es {
				size := int64(110_000 + i)
				es[i] = backend.Entry{Name: fmt.Sprintf("%s_%d.JPEG", dir, 10000+i), Mode: 0o644, Size: size, ModTime: mt,
					Version: fmt.Sprintf("%x-%x", size, mt.UnixNano())}
			}
			listing[dir] = es
		}
		return listing
	}
	var ms runtime.MemStats
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		listing := mk()
		b.StartTimer()
		tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir}, listing)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		listing = nil
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc-base)/(classes*per), "heapB/file")
		runtime.KeepAlive(tr)
		runtime.KeepAlive(listing)
	}
}
