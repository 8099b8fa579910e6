package backendtest

import (
	"fmt"
	iofs "io/fs"
	"slices"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

func testListSorted(t *testing.T, f Fixture) {
	// "a" is a directory: as a name it sorts first among the a's, although
	// its objects ("a/x") sort after "a-b" and "a.." in a flat key listing.
	for _, p := range []string{"z", "ä", "a..", "a-b", "a b", "a/x", "B"} {
		put(t, f, p, 10)
	}
	b := open(t, f)
	es := mustList(t, b, "")
	want := []string{"B", "a", "a b", "a-b", "a..", "z", "ä"}
	if got := names(es); !slices.Equal(got, want) {
		t.Fatalf("List(\"\") names = %q, want %q (byte order)", got, want)
	}
	for _, e := range es {
		if gotDir, wantDir := e.IsDir(), e.Name == "a"; gotDir != wantDir {
			t.Errorf("entry %q: IsDir = %v, want %v", e.Name, gotDir, wantDir)
		}
		if !e.IsDir() && e.Size != 10 {
			t.Errorf("entry %q: Size = %d, want 10", e.Name, e.Size)
		}
	}
	if got := names(mustList(t, b, "a")); !slices.Equal(got, []string{"x"}) {
		t.Errorf("List(\"a\") = %q, want [x]", got)
	}
}

func testNestedDirs(t *testing.T, f Fixture) {
	put(t, f, "d/e/f.bin", 100)
	put(t, f, "d/g.bin", 7)
	b := open(t, f)
	root := mustList(t, b, "")
	if len(root) != 1 || root[0].Name != "d" || !root[0].IsDir() {
		t.Fatalf("List(\"\") = %+v, want one directory d", root)
	}
	d := mustList(t, b, "d")
	if got := names(d); !slices.Equal(got, []string{"e", "g.bin"}) {
		t.Fatalf("List(\"d\") = %q, want [e g.bin]", got)
	}
	e, g := d[0], d[1]
	if !e.IsDir() || e.Mode&iofs.ModeDir == 0 || e.Size != 0 || e.Version != "" {
		t.Errorf("directory entry e = %+v, want ModeDir, size 0, no version", e)
	}
	if g.IsDir() || g.Mode.Type() != 0 || g.Size != 7 || g.Version == "" || g.ModTime.IsZero() {
		t.Errorf("file entry g.bin = %+v, want a regular file of 7 bytes with version and mtime", g)
	}
	if got := names(mustList(t, b, "d/e")); !slices.Equal(got, []string{"f.bin"}) {
		t.Errorf("List(\"d/e\") = %q, want [f.bin]", got)
	}
}

func testListErrors(t *testing.T, f Fixture) {
	put(t, f, "d/file", 3)
	b := open(t, f)
	for _, dir := range []string{"missing", "d/missing", "missing/deeper"} {
		_, err := b.List(t.Context(), dir)
		wantErr(t, fmt.Sprintf("List(%q)", dir), err, iofs.ErrNotExist)
	}
	if es, err := b.List(t.Context(), "d/file"); err == nil {
		t.Errorf("List of a file = %+v, nil; want an error", es)
	}
}

func testStat(t *testing.T, f Fixture) {
	put(t, f, "d/file.bin", 1234)
	b := open(t, f)
	e := mustStat(t, b, "d/file.bin")
	if e.Name != "file.bin" || e.IsDir() || e.Mode.Type() != 0 || e.Size != 1234 || e.Version == "" || e.ModTime.IsZero() {
		t.Errorf("Stat(file) = %+v, want regular file.bin of 1234 bytes with version and mtime", e)
	}
	if again := mustStat(t, b, "d/file.bin"); again.Version != e.Version {
		t.Errorf("Stat twice: version %q then %q", e.Version, again.Version)
	}
	if l := mustList(t, b, "d"); len(l) != 1 || !sameEntry(l[0], e) {
		t.Errorf("List(\"d\") = %+v, want [%+v] as Stat says", l, e)
	}
	d := mustStat(t, b, "d")
	if d.Name != "d" || !d.IsDir() || d.Version != "" {
		t.Errorf("Stat(dir) = %+v, want directory d without version", d)
	}
	r := mustStat(t, b, "")
	if r.Name != "" || !r.IsDir() {
		t.Errorf("Stat(root) = %+v, want a directory named \"\"", r)
	}
	for _, p := range []string{"missing", "d/missing", "missing/x", "d/file.bin/x"} {
		_, err := b.Stat(t.Context(), p)
		if p == "d/file.bin/x" {
			if err == nil {
				t.Errorf("Stat(%q) below a file: no error", p)
			}
			continue
		}
		wantErr(t, fmt.Sprintf("Stat(%q)", p), err, iofs.ErrNotExist)
	}
}

// sameEntry compares entries, times with Equal.
func sameEntry(a, b backend.Entry) bool {
	return a.Name == b.Name && a.Mode == b.Mode && a.Size == b.Size &&
		a.ModTime.Equal(b.ModTime) && a.Version == b.Version && a.Target == b.Target
}

func testManyEntries(t *testing.T, f Fixture) {
	// More than one page of an object store's listing (S3 returns 1,000).
	const n = 1005
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("f%04d", i)
		put(t, f, "many/"+want[i], 8)
	}
	b := open(t, f)
	if got := names(mustList(t, b, "many")); !slices.Equal(got, want) {
		t.Errorf("List(\"many\") returned %d names, want %d in order (first %q)", len(got), n, got[:min(3, len(got))])
	}
}
