package local

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

// Walk reports each directory's entries together and sorted by name (the
// tree is built from sorted directories without copying them), whatever
// order they were created in; List sorts the same way.
func TestWalkSortsEachDirectory(t *testing.T) {
	root := t.TempDir()
	want := map[string][]string{}
	for d := range 3 {
		dir := fmt.Sprintf("d%d", d)
		// Created in reverse order, with names whose byte order differs
		// from their numeric order.
		for i := 300; i > 0; i-- {
			name := fmt.Sprintf("f%d", i*7919%1000)
			if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want[dir] = append(want[dir], name)
		}
		want[""] = append(want[""], dir)
	}
	for d, names := range want {
		slices.Sort(names)
		want[d] = slices.Compact(names)
	}
	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var mu sync.Mutex
	got := map[string][]string{}
	err = b.Walk(t.Context(), "", func(p string, e backend.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		dir := path.Dir(p)
		if dir == "." {
			dir = ""
		}
		got[dir] = append(got[dir], e.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for d, w := range want {
		if !slices.Equal(got[d], w) {
			t.Errorf("Walk of %q: %d names %q..., want %d sorted %q...", d, len(got[d]), got[d][:min(3, len(got[d]))], len(w), w[:3])
		}
		es, err := b.List(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name)
		}
		if !slices.Equal(names, w) {
			t.Errorf("List of %q not sorted: %q...", d, names[:min(3, len(names))])
		}
	}
}
