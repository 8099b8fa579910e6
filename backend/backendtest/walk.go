package backendtest

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

// walkTree is the tree the Walker tests build: files at several depths, an
// empty object, and directories that hold only directories.
var walkTree = []string{"4", "a/3", "a/b/2", "a/b/c/1", "e/6", "e/f/g/h/5", "e/f/empty"}

func putWalkTree(t *testing.T, f Fixture) {
	for i, p := range walkTree {
		n := 10 * i
		if p == "e/f/empty" {
			n = 0
		}
		put(t, f, p, n)
	}
}

func testWalker(t *testing.T, f Fixture) {
	putWalkTree(t, f)
	b := open(t, f)
	w, ok := b.(backend.Walker)
	if !ok {
		t.Skipf("%s does not implement backend.Walker", b)
	}
	for _, dir := range []string{"", "a", "e/f"} {
		want := map[string]backend.Entry{}
		listTree(t, b, dir, want)
		got := map[string]backend.Entry{}
		err := w.Walk(t.Context(), dir, func(path string, e backend.Entry) error {
			if _, dup := got[path]; dup {
				t.Errorf("Walk(%q) reported %q twice", dir, path)
			}
			got[path] = e
			return nil
		})
		if err != nil {
			t.Fatalf("Walk(%q): %v", dir, err)
		}
		if len(got) != len(want) {
			t.Errorf("Walk(%q) reported %d entries, recursive List %d", dir, len(got), len(want))
		}
		for p, we := range want {
			if ge, ok := got[p]; !ok {
				t.Errorf("Walk(%q) missed %q", dir, p)
			} else if !sameEntry(ge, we) {
				t.Errorf("Walk(%q) entry %q = %+v, List says %+v", dir, p, ge, we)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				t.Errorf("Walk(%q) reported %q, which recursive List does not", dir, p)
			}
		}
	}
	err := w.Walk(t.Context(), "missing", func(string, backend.Entry) error { return nil })
	wantErr(t, "Walk(\"missing\")", err, iofs.ErrNotExist)
}

func testWalkerStops(t *testing.T, f Fixture) {
	putWalkTree(t, f)
	b := open(t, f)
	w, ok := b.(backend.Walker)
	if !ok {
		t.Skipf("%s does not implement backend.Walker", b)
	}
	stop := errors.New("stop here")
	calls := 0
	err := w.Walk(t.Context(), "", func(string, backend.Entry) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("Walk whose fn fails = %v, want the fn's error", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times after returning an error on the first, want 1", calls)
	}
}

// listTree adds every entry below dir to into, listing directory by
// directory.
func listTree(t *testing.T, b backend.Backend, dir string, into map[string]backend.Entry) {
	t.Helper()
	for _, e := range mustList(t, b, dir) {
		p := e.Name
		if dir != "" {
			p = fmt.Sprintf("%s/%s", dir, e.Name)
		}
		into[p] = e
		if e.IsDir() {
			listTree(t, b, p, into)
		}
	}
}
