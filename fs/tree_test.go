package fs

import (
	"context"
	iofs "io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
)

var treeFiles = map[string]int64{
	"a/b":       10,
	"a-c":       20,
	"a/z/deep":  30,
	"b/x y":     0,
	"b/ünï":     40,
	"top":       50,
	"a/z/deep2": 60,
}

func TestBuildTreeIDsInPathOrder(t *testing.T) {
	for _, b := range []backend.Backend{newFakeBackend(treeFiles), walkerBackend{newFakeBackend(treeFiles)}} {
		listing, err := listAll(t.Context(), b, 3)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir | 0o755}, listing)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		var bytes int64
		for p, s := range treeFiles {
			want = append(want, p)
			bytes += s
		}
		slices.Sort(want) // "a-c" < "a/b": byte order of full paths
		if tr.files() != len(want) || tr.bytes != bytes {
			t.Fatalf("%T: files %d bytes %d, want %d %d", b, tr.files(), tr.bytes, len(want), bytes)
		}
		for id, p := range want {
			if got := tr.pathOf(tr.fileEnt[id]); got != p {
				t.Errorf("%T: path of ID %d = %q, want %q", b, id, got, p)
			}
			e, ok := tr.lookupPath(p)
			if !ok || tr.ents[e].ref != uint32(id) || tr.ents[e].size != treeFiles[p] {
				t.Errorf("%T: lookupPath(%q) = %d %v", b, p, e, ok)
			}
			if v := tr.str(tr.fileVer[id]); v != fmtInt(treeFiles[p]) {
				t.Errorf("%T: version of %q = %q", b, p, v)
			}
		}
		for _, miss := range []string{"nope", "a/nope", "top/x", "a/z/deep/x"} {
			if _, ok := tr.lookupPath(miss); ok {
				t.Errorf("%T: lookupPath(%q) found", b, miss)
			}
		}
		// Children are sorted and directories counted.
		a, _ := tr.lookupPath("a")
		d := tr.dirs[tr.ents[a].ref]
		var names []string
		for i := d.first; i < d.first+d.count; i++ {
			names = append(names, tr.name(i))
		}
		if !slices.Equal(names, []string{"b", "z"}) || d.nsub != 1 {
			t.Errorf("%T: children of a = %v nsub %d", b, names, d.nsub)
		}
	}
}

func TestBuildTreeSkipsSpecialAndDuplicates(t *testing.T) {
	now := time.Now()
	listing := map[string][]backend.Entry{"": {
		{Name: "f", Mode: 0o600, Size: 3, ModTime: now, Version: "v"},
		{Name: "f", Mode: 0o600, Size: 3, ModTime: now, Version: "v"},
		{Name: "fifo", Mode: iofs.ModeNamedPipe | 0o600},
		{Name: "dev", Mode: iofs.ModeDevice | 0o600},
		{Name: "l", Mode: iofs.ModeSymlink | 0o777, Target: "f"},
		{Name: "bad/name", Mode: 0o600},
	}}
	tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir}, listing)
	if err != nil {
		t.Fatal(err)
	}
	d := tr.dirs[0]
	var names []string
	for i := d.first; i < d.first+d.count; i++ {
		names = append(names, tr.name(i))
	}
	if !slices.Equal(names, []string{"f", "l"}) {
		t.Fatalf("root = %v, want [f l]", names)
	}
	if l, _ := tr.lookupPath("l"); tr.str(tr.links[tr.ents[l].ref]) != "f" {
		t.Errorf("link target wrong")
	}
}

func TestListAllParallelDeep(t *testing.T) {
	files := map[string]int64{}
	for i := range 30 {
		files[strings.Repeat("d/", i)+"f"] = int64(i)
	}
	for i := range 200 {
		files["wide/"+fmtInt(int64(i))+"/x"] = 1
	}
	b := newFakeBackend(files)
	listing, err := listAll(t.Context(), b, 2)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir}, listing)
	if err != nil {
		t.Fatal(err)
	}
	if tr.files() != len(files) {
		t.Fatalf("files = %d, want %d", tr.files(), len(files))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := listAll(ctx, failingList{b}, 2); err == nil {
		t.Fatal("listAll with failing List succeeded")
	}
}

type failingList struct{ *fakeBackend }

func (f failingList) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	if dir == "wide/17" {
		return nil, errBoom
	}
	return f.fakeBackend.List(ctx, dir)
}

func TestCmpJoined(t *testing.T) {
	parts := []string{"", "a", "a-c", "a/b", "ab", "b", "a/", "z", "ü", "a.b"}
	for _, d1 := range parts {
		for _, n1 := range parts[1:] {
			for _, d2 := range parts {
				for _, n2 := range parts[1:] {
					want := strings.Compare(joinPath(d1, n1), joinPath(d2, n2))
					if got := cmpJoined(d1, n1, d2, n2); got != want {
						t.Fatalf("cmpJoined(%q, %q, %q, %q) = %d, want %d", d1, n1, d2, n2, got, want)
					}
				}
			}
		}
	}
}
