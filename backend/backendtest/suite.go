// Package backendtest is the conformance suite that every backend.Backend
// passes (local, Azure Blob on Azurite, S3 on an in-process server), and the
// deterministic test content (Pattern) that tests of other packages use so
// any byte read can be checked.
//
// Stores under test have no empty directories: directories are implied by
// object paths, and the suite never asks for an empty one. Run closes every
// backend it obtains from a fixture.
package backendtest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

// Fixture creates objects in a fresh, empty store and returns the backend
// over it.
type Fixture interface {
	// Put creates or replaces the object at path with data (parents
	// implied). A replacement must get a new version even when it has the
	// same size and lands within the store's timestamp granularity.
	Put(t testing.TB, path string, data []byte)
	// Backend returns the backend under test over the store's root.
	Backend(t testing.TB) backend.Backend
}

// Run runs the suite; newFixture returns a fresh empty store for each
// subtest.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"ListSorted", testListSorted},
		{"NestedDirs", testNestedDirs},
		{"ListErrors", testListErrors},
		{"Stat", testStat},
		{"VersionChange", testVersionChange},
		{"ReadRanges", testReadRanges},
		{"ZeroLength", testZeroLength},
		{"LargeObjectRanges", testLargeObjectRanges},
		{"ReadMissing", testReadMissing},
		{"UnicodeAndSpaceNames", testUnicodeNames},
		{"InvalidPaths", testInvalidPaths},
		{"ManyEntries", testManyEntries},
		{"Walker", testWalker},
		{"WalkerStops", testWalkerStops},
		{"ConcurrentReads", testConcurrentReads},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newFixture(t)) })
	}
}

// open returns f's backend and closes it when the test ends.
func open(t *testing.T, f Fixture) backend.Backend {
	t.Helper()
	b := f.Backend(t)
	if b.String() == "" {
		t.Errorf("String() is empty")
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// put stores n bytes of the pattern of path.
func put(t *testing.T, f Fixture, path string, n int) {
	t.Helper()
	f.Put(t, path, PatternBytes(path, n))
}

func mustList(t *testing.T, b backend.Backend, dir string) []backend.Entry {
	t.Helper()
	es, err := b.List(t.Context(), dir)
	if err != nil {
		t.Fatalf("List(%q): %v", dir, err)
	}
	return es
}

func mustStat(t *testing.T, b backend.Backend, path string) backend.Entry {
	t.Helper()
	e, err := b.Stat(t.Context(), path)
	if err != nil {
		t.Fatalf("Stat(%q): %v", path, err)
	}
	return e
}

func names(es []backend.Entry) []string {
	ns := make([]string, len(es))
	for i, e := range es {
		ns[i] = e.Name
	}
	return ns
}

// checkRead reads n bytes at off from path (an object of size bytes of its
// own pattern) and checks io.ReaderAt semantics and every byte.
func checkRead(t testing.TB, b backend.Backend, path, version string, size, off int64, n int) {
	t.Helper()
	p := make([]byte, n)
	got, err := b.ReadAt(t.Context(), path, version, p, off)
	want := int64(n)
	if avail := max(size-off, 0); avail < want {
		want = avail
	}
	if int64(got) != want {
		t.Errorf("ReadAt(%q, off %d, len %d) = %d bytes, %v; want %d", path, off, n, got, err, want)
		return
	}
	switch {
	case want < int64(n) && err != io.EOF:
		t.Errorf("ReadAt(%q, off %d, len %d) short read of %d with err %v; want io.EOF", path, off, n, got, err)
	case want == int64(n) && err != nil && err != io.EOF:
		t.Errorf("ReadAt(%q, off %d, len %d): %v", path, off, n, err)
	case want == int64(n) && err == io.EOF && off+want < size:
		t.Errorf("ReadAt(%q, off %d, len %d): io.EOF before the end of a %d-byte object", path, off, n, size)
	}
	exp := make([]byte, got)
	Pattern(path, off, exp)
	if bytes.Equal(p[:got], exp) {
		return
	}
	for i := range exp {
		if p[i] != exp[i] {
			t.Errorf("ReadAt(%q, off %d): byte at %d = %#x, want %#x", path, off, off+int64(i), p[i], exp[i])
			return
		}
	}
}

// wantErr checks that err satisfies one of targets.
func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	t.Errorf("%s: error %v, want one satisfying %v", what, err, targets)
}
