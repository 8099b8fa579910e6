package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

func testVersionChange(t *testing.T, f Fixture) {
	const path = "obj.bin"
	put(t, f, path, 1000)
	b := open(t, f)
	v1 := mustStat(t, b, path)

	// Same size, different bytes: only the version can tell them apart.
	other := PatternBytes("other", 1000)
	f.Put(t, path, other)
	v2 := mustStat(t, b, path)
	if v2.Version == "" || v2.Version == v1.Version {
		t.Fatalf("version after replace = %q, before %q; want a new non-empty version", v2.Version, v1.Version)
	}
	p := make([]byte, 100)
	_, err := b.ReadAt(t.Context(), path, v1.Version, p, 0)
	wantErr(t, "ReadAt with the replaced version", err, backend.ErrStale)
	p = make([]byte, 1000)
	if n, err := b.ReadAt(t.Context(), path, v2.Version, p, 0); n != 1000 || (err != nil && err != io.EOF) || !bytes.Equal(p, other) {
		t.Errorf("ReadAt with the new version = %d, %v (content equal: %v); want the new 1000 bytes", n, err, bytes.Equal(p, other))
	}

	put(t, f, path, 3000)
	v3 := mustStat(t, b, path)
	if v3.Size != 3000 || v3.Version == v2.Version || v3.Version == v1.Version {
		t.Fatalf("after a replace with 3000 bytes: %+v (old versions %q, %q)", v3, v1.Version, v2.Version)
	}
	_, err = b.ReadAt(t.Context(), path, v2.Version, p, 0)
	wantErr(t, "ReadAt with the second version", err, backend.ErrStale)
	checkRead(t, b, path, v3.Version, 3000, 0, 3000)
}

func testReadRanges(t *testing.T, f Fixture) {
	const path, size = "r/obj", 10000
	put(t, f, path, size)
	b := open(t, f)
	v := mustStat(t, b, path).Version
	for _, tc := range []struct {
		name string
		off  int64
		n    int
	}{
		{"full", 0, size},
		{"partial", 100, 1000},
		{"unaligned", 4093, 7},
		{"tail", size - 1000, 1000},
		{"straddles EOF", size - 500, 1000},
		{"at EOF", size, 10},
		{"past EOF", 2 * size, 10},
		{"larger than object", 0, 2 * size},
		{"one byte", size - 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRead(t, b, path, v, size, tc.off, tc.n) })
	}
	if n, err := b.ReadAt(t.Context(), path, v, nil, 5); n != 0 || (err != nil && err != io.EOF) {
		t.Errorf("ReadAt of 0 bytes = %d, %v; want 0, nil", n, err)
	}
	if _, err := b.ReadAt(t.Context(), path, v, make([]byte, 4), -1); err == nil {
		t.Errorf("ReadAt at offset -1: no error")
	}
}

func testZeroLength(t *testing.T, f Fixture) {
	f.Put(t, "empty", nil)
	put(t, f, "other", 5)
	b := open(t, f)
	e := mustStat(t, b, "empty")
	if e.Size != 0 || e.IsDir() || e.Version == "" {
		t.Fatalf("Stat(empty) = %+v, want a regular file of 0 bytes with a version", e)
	}
	if l := mustList(t, b, ""); len(l) != 2 || l[0].Name != "empty" || l[0].Size != 0 || l[0].IsDir() {
		t.Errorf("List(\"\") = %+v, want empty (0 bytes) and other", l)
	}
	checkRead(t, b, "empty", e.Version, 0, 0, 10)
}

func testLargeObjectRanges(t *testing.T, f Fixture) {
	const path, size = "big/5MiB.bin", 5 << 20
	put(t, f, path, size)
	b := open(t, f)
	e := mustStat(t, b, path)
	if e.Size != size {
		t.Fatalf("Size = %d, want %d", e.Size, size)
	}
	checkRead(t, b, path, e.Version, size, 0, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		off := rng.Int64N(size + 1)
		n := rng.IntN(300_000)
		checkRead(t, b, path, e.Version, size, off, n)
	}
	for _, off := range []int64{1 << 20, 4<<20 - 1, 4 << 20, size - 1} {
		checkRead(t, b, path, e.Version, size, off, 1<<20)
	}
}

func testReadMissing(t *testing.T, f Fixture) {
	put(t, f, "d/x", 10)
	b := open(t, f)
	v := mustStat(t, b, "d/x").Version
	for _, p := range []string{"missing", "d/missing", "missing/deeper"} {
		_, err := b.ReadAt(t.Context(), p, v, make([]byte, 4), 0)
		wantErr(t, fmt.Sprintf("ReadAt(%q)", p), err, iofs.ErrNotExist)
	}
	if _, err := b.ReadAt(t.Context(), "d", "", make([]byte, 4), 0); err == nil {
		t.Errorf("ReadAt of a directory: no error")
	}
}

func testUnicodeNames(t *testing.T, f Fixture) {
	paths := []string{
		"dir with space/file with space.bin",
		"ünïcödé/日本語 ファイル.txt",
		"emoji 🙂/x",
		"percent%20plus+/a%2Fb+c.bin",
	}
	for i, p := range paths {
		put(t, f, p, 100+i)
	}
	b := open(t, f)
	for i, p := range paths {
		dir, base := splitPath(p)
		if got := names(mustList(t, b, dir)); len(got) != 1 || got[0] != base {
			t.Errorf("List(%q) = %q, want [%q]", dir, got, base)
		}
		e := mustStat(t, b, p)
		if e.Name != base || e.Size != int64(100+i) {
			t.Errorf("Stat(%q) = %+v, want %q of %d bytes", p, e, base, 100+i)
		}
		checkRead(t, b, p, e.Version, e.Size, 0, int(e.Size))
	}
}

func testInvalidPaths(t *testing.T, f Fixture) {
	put(t, f, "a/b", 10)
	b := open(t, f)
	v := mustStat(t, b, "a/b").Version
	for _, p := range []string{"..", "../a/b", "/a/b", "a/../a/b", "a//b", "./a/b", "a/b/", "a/./b"} {
		_, err := b.Stat(t.Context(), p)
		wantErr(t, fmt.Sprintf("Stat(%q)", p), err, iofs.ErrInvalid, iofs.ErrNotExist)
		_, err = b.List(t.Context(), p)
		wantErr(t, fmt.Sprintf("List(%q)", p), err, iofs.ErrInvalid, iofs.ErrNotExist)
		_, err = b.ReadAt(t.Context(), p, v, make([]byte, 4), 0)
		wantErr(t, fmt.Sprintf("ReadAt(%q)", p), err, iofs.ErrInvalid, iofs.ErrNotExist)
	}
}

func testConcurrentReads(t *testing.T, f Fixture) {
	const files, size = 8, 300_000
	paths := make([]string, files)
	for i := range paths {
		paths[i] = fmt.Sprintf("c/%d.bin", i)
		put(t, f, paths[i], size)
	}
	b := open(t, f)
	versions := make([]string, files)
	for i, p := range paths {
		versions[i] = mustStat(t, b, p).Version
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 40 {
				i := rng.IntN(files)
				checkRead(t, b, paths[i], versions[i], size, rng.Int64N(size), rng.IntN(64<<10))
			}
		})
	}
	wg.Wait()
}

func testCancelled(t *testing.T, f Fixture) {
	put(t, f, "d/x", 10)
	b := open(t, f)
	v := mustStat(t, b, "d/x").Version
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.List(ctx, "d")
	wantErr(t, "List with a cancelled context", err, context.Canceled)
	_, err = b.Stat(ctx, "d/x")
	wantErr(t, "Stat with a cancelled context", err, context.Canceled)
	_, err = b.ReadAt(ctx, "d/x", v, make([]byte, 4), 0)
	wantErr(t, "ReadAt with a cancelled context", err, context.Canceled)
	if w, ok := b.(backend.Walker); ok {
		err = w.Walk(ctx, "", func(string, backend.Entry) error { return nil })
		wantErr(t, "Walk with a cancelled context", err, context.Canceled)
	}
}

// splitPath splits a path into its parent ("" for the root) and base name.
func splitPath(p string) (dir, base string) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i], p[i+1:]
		}
	}
	return "", p
}
