package azblob_test

import (
	"errors"
	iofs "io/fs"
	"maps"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/stallfs/stallfs/backend"
)

// TestBlobNamesThatAreNotPaths covers what a flat namespace allows and a
// tree does not: a blob and a "directory" of the same name, names with
// empty or dot segments, "dir/" markers, and HNS folder blobs.
func TestBlobNamesThatAreNotPaths(t *testing.T) {
	f := newFixture(t, "")
	for _, name := range []string{
		"a", "a/b", // "a" is a blob and a directory: the directory wins
		"a-1", "a.txt", // sort between "a" and "a/"
		"x//y", "./z", "q/../r", "q/ok", // not paths: skipped
		"m/",           // a directory marker with nothing below
		"n/", "n/file", // a marker with something below
		"p/q/deep", "top.bin", // plain
	} {
		data := []byte(name)
		if name[len(name)-1] == '/' {
			data = nil
		}
		f.srv.Put(t, f.container, name, data)
	}
	// An HNS-style folder blob: zero bytes, hdi_isfolder=true.
	folder := "h"
	isFolder := "true"
	_, err := f.srv.Client(t, f.container).NewBlockBlobClient(folder).UploadBuffer(t.Context(), nil,
		&blockblob.UploadBufferOptions{Metadata: map[string]*string{"hdi_isfolder": &isFolder}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Put(t, f.container, "h/in", []byte("in"))

	b := f.open(t, f.opts)
	t.Cleanup(func() { b.Close() })

	es, err := b.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range es {
		got[e.Name] = e.IsDir()
	}
	want := map[string]bool{"a": true, "a-1": false, "a.txt": false, "h": true, "m": true, "n": true,
		"p": true, "q": true, "top.bin": false, "x": true}
	if !maps.Equal(got, want) {
		t.Errorf("List(\"\") = %v\nwant %v", got, want)
	}
	if !slices.IsSortedFunc(es, func(x, y backend.Entry) int { return cmp(x.Name, y.Name) }) {
		t.Errorf("List(\"\") not sorted: %v", es)
	}
	if es, err := b.List(t.Context(), "m"); err != nil || len(es) != 0 {
		t.Errorf("List(\"m\") of an empty marker directory = %v, %v; want empty", es, err)
	}
	if e, err := b.Stat(t.Context(), "a"); err != nil || !e.IsDir() {
		t.Errorf("Stat(\"a\") = %+v, %v; want the directory", e, err)
	}
	if e, err := b.Stat(t.Context(), "h"); err != nil || !e.IsDir() {
		t.Errorf("Stat(\"h\") = %+v, %v; want the HNS folder as a directory", e, err)
	}
	if e, err := b.Stat(t.Context(), "m"); err != nil || !e.IsDir() {
		t.Errorf("Stat(\"m\") = %+v, %v; want the marker's directory", e, err)
	}
	if _, err := b.List(t.Context(), "top.bin"); err == nil || errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("List of a file = %v; want a not-a-directory error", err)
	}

	walked := map[string]bool{}
	err = b.Walk(t.Context(), "", func(p string, e backend.Entry) error {
		if _, dup := walked[p]; dup {
			t.Errorf("Walk reported %q twice", p)
		}
		walked[p] = e.IsDir()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantWalk := map[string]bool{
		"a": true, "a/b": false, "a-1": false, "a.txt": false, "h": true, "h/in": false,
		"m": true, "n": true, "n/file": false, "p": true, "p/q": true, "p/q/deep": false,
		"q": true, "q/ok": false, "top.bin": false, "x": true,
	}
	if !maps.Equal(walked, wantWalk) {
		t.Errorf("Walk(\"\") = %v\nwant %v", walked, wantWalk)
	}
	// Skipped: the blob "a" by List and by Walk, the prefix "./" by
	// List, "x//y", "./z" and "q/../r" by Walk.
	if st := b.Stats(); st.Skipped < 6 {
		t.Errorf("Stats().Skipped = %d; want the shadowed blob and the invalid names counted", st.Skipped)
	}
}

func cmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestVersionsAgree checks that the ETag of a listing, of a walk and of the
// blob's properties are the same string (Azurite quotes them differently).
func TestVersionsAgree(t *testing.T) {
	f := newFixture(t, "")
	f.Put(t, "d/x", []byte("hello"))
	b := f.open(t, f.opts)
	t.Cleanup(func() { b.Close() })
	es, err := b.List(t.Context(), "d")
	if err != nil || len(es) != 1 {
		t.Fatalf("List = %v, %v", es, err)
	}
	st, err := b.Stat(t.Context(), "d/x")
	if err != nil {
		t.Fatal(err)
	}
	var walked string
	if err := b.Walk(t.Context(), "d", func(p string, e backend.Entry) error {
		walked = e.Version
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if es[0].Version == "" || es[0].Version != st.Version || walked != st.Version {
		t.Errorf("versions: List %q, Stat %q, Walk %q; want one string", es[0].Version, st.Version, walked)
	}
	for _, v := range []string{es[0].Version, `"` + st.Version + `"`} {
		p := make([]byte, 5)
		if n, err := b.ReadAt(t.Context(), "d/x", v, p, 0); n != 5 || err != nil {
			t.Errorf("ReadAt(version %q) = %d, %v", v, n, err)
		}
	}
}
