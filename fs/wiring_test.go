package fs

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// The real cache and stats recorder plug into the read path as is.
var (
	_ Cache         = (*mincache.Cache)(nil)
	_ cacheLookuper = (*mincache.Cache)(nil)
	_ Recorder      = (*stats.Recorder)(nil)
)

// countingBackend counts the bytes read from its backend.
type countingBackend struct {
	dirBackend
	bytes atomic.Int64
}

func (c *countingBackend) ReadAt(ctx context.Context, p, v string, buf []byte, off int64) (int, error) {
	n, err := c.dirBackend.ReadAt(ctx, p, v, buf, off)
	c.bytes.Add(int64(n))
	return n, err
}

// TestMountMinIOEpochs reads a dataset twice in random order through a
// mount whose memory tier holds about half of it: epoch 2 reads from the
// backend exactly the bytes that were not admitted.
func TestMountMinIOEpochs(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := makeDataset(t, src)
	var dataset int64
	for p := range files {
		fi, _ := os.Stat(filepath.Join(src, p))
		dataset += fi.Size()
	}
	cache, err := mincache.Open(mincache.Options{MemBytes: dataset / 2, Source: "file://" + src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	b := &countingBackend{dirBackend: dirBackend{root: src}}
	var rec *stats.Recorder
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := New(t.Context(), mnt, b, Options{
		ControlSocket: filepath.Join(t.TempDir(), "c.sock"),
		BeforeMount: func(m *Mount) error {
			rec = stats.New(stats.Options{Files: m.Files(), DatasetBytes: m.DatasetBytes(), SizeOf: m.SizeOf, PathOf: m.PathOf})
			m.SetCache(cache)
			m.SetRecorder(rec)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmount() })
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	})
	epoch := func(seed uint64) int64 {
		before := b.bytes.Load()
		rand.New(rand.NewPCG(seed, 0)).Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
		for _, p := range paths {
			got, err := os.ReadFile(filepath.Join(mnt, p))
			if err != nil {
				t.Fatal(err)
			}
			checkPat(t, p, got, files[p], 0)
		}
		return b.bytes.Load() - before
	}
	if got := epoch(1); got != dataset {
		t.Fatalf("epoch 1 read %d bytes from the backend, want the dataset %d", got, dataset)
	}
	var cached int64
	for p := range files {
		id, _ := m.FileID(p)
		size := m.SizeOf(id)
		for k := int64(0); k*m.opts.ChunkSize < max(size, 1); k++ {
			key := mincache.Key{Path: p, Version: m.tree.str(m.tree.fileVer[id]), Chunk: k}
			if n, tier := cache.Lookup(key); tier != mincache.None {
				cached += n
			}
		}
	}
	if cached == 0 || cached >= dataset {
		t.Fatalf("cached %d of %d bytes", cached, dataset)
	}
	if got := epoch(2); got != dataset-cached {
		t.Errorf("epoch 2 read %d bytes from the backend, want dataset-cached = %d", got, dataset-cached)
	}
}
