package azblob_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/azblob"
)

// walked is one fn call of a Walk.
type walked struct {
	path string
	e    backend.Entry
}

func walkEntries(t *testing.T, b *azblob.Backend, dir string) ([]walked, error) {
	t.Helper()
	var out []walked
	err := b.Walk(t.Context(), dir, func(p string, e backend.Entry) error {
		out = append(out, walked{p, e})
		return nil
	})
	return out, err
}

// putLayout stores an ImageNet-like tree of a few hundred small blobs
// (train/ with 12 classes of 20, val/ with 4 of 10), names that sort
// around the slash, a blob that is also a directory, names that are not
// paths, folder markers and an HNS folder blob. It returns how many blobs
// it stored.
func putLayout(t *testing.T, f *fixture) int {
	t.Helper()
	names := []string{
		"README", "a", "a/b", "a-1", "a.txt", "m/", "n/", "n/file", "deep/1/2/3/4",
		"x//y", "./z", "train/n003",
	}
	for c := range 12 {
		for i := range 20 {
			names = append(names, fmt.Sprintf("train/n%03d/img%04d.JPEG", c, i))
		}
	}
	for c := range 4 {
		for i := range 10 {
			names = append(names, fmt.Sprintf("val/n%03d/img%04d.JPEG", c, i))
		}
	}
	names = append(names, "h/in")
	full := func(name string) string {
		if f.prefix == "" {
			return name
		}
		return f.prefix + "/" + name
	}
	cc := f.srv.Client(t, f.container)
	var g errgroup.Group
	g.SetLimit(16)
	for _, name := range names {
		data := []byte(name)
		if name[len(name)-1] == '/' {
			data = nil
		}
		g.Go(func() error {
			_, err := cc.NewBlockBlobClient(full(name)).UploadBuffer(t.Context(), data, nil)
			return err
		})
	}
	isFolder := "true"
	g.Go(func() error {
		_, err := cc.NewBlockBlobClient(full("h")).UploadBuffer(t.Context(), nil,
			&blockblob.UploadBufferOptions{Metadata: map[string]*string{"hdi_isfolder": &isFolder}})
		return err
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return len(names) + 1
}

func firstDiff(a, b []walked) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestParallelWalkMatchesFlat walks flat and in parallel, with pages of 7
// names, and wants the same calls in the same order.
func TestParallelWalkMatchesFlat(t *testing.T) {
	for _, prefix := range []string{"data/set"} { // names relative to a prefix, and beside it
		f := newFixture(t, prefix)
		if prefix != "" {
			f.srv.Put(t, f.container, "data/settle", []byte("beside the prefix"))
		}
		blobs := putLayout(t, f)
		for _, dir := range []string{"", "train"} {
			o := f.opts
			o.ListPageSize, o.ListConcurrency = 7, 1
			flat := f.open(t, o)
			want, err := walkEntries(t, flat, dir)
			if err != nil {
				t.Fatalf("flat Walk(%q): %v", dir, err)
			}
			if dir == "" && len(want) < blobs/2 {
				t.Fatalf("flat Walk reported %d entries for %d blobs", len(want), blobs)
			}
			for _, conc := range []int{2, 16} {
				o.ListConcurrency = conc
				par := f.open(t, o)
				got, err := walkEntries(t, par, dir)
				if err != nil {
					t.Fatalf("Walk(%q) with ListConcurrency %d: %v", dir, conc, err)
				}
				for i := range got {
					// Synthesised directories carry the backend's start.
					if got[i].e.IsDir() && i < len(want) && want[i].e.IsDir() {
						got[i].e.ModTime = want[i].e.ModTime
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("prefix %q: Walk(%q) with ListConcurrency %d reported %d entries, flat %d; first difference at %d",
						prefix, dir, conc, len(got), len(want), firstDiff(got, want))
				}
				if s, fs := par.Stats().Skipped, flat.Stats().Skipped; s != fs {
					t.Errorf("prefix %q: Walk(%q) with ListConcurrency %d skipped %d names, flat %d", prefix, dir, conc, s, fs)
				}
				par.Close()
			}
			flat.Close()
		}
	}
}

func TestParallelWalkFailingPrefixFailsWalk(t *testing.T) {
	f := newFixture(t, "")
	putLayout(t, f)
	for _, tc := range []struct {
		prefix, delimiter, path string
	}{
		{"train/n007/", "", "train/n007"}, // a class, listed flat
		{"train/", "/", "train"},          // a level of the plan
	} {
		p := newProxy(t, f.srv, answering(func(r *http.Request) int {
			q := r.URL.Query()
			if q.Get("comp") == "list" && q.Get("prefix") == tc.prefix && q.Get("delimiter") == tc.delimiter {
				return http.StatusForbidden
			}
			return 0
		}))
		o := f.opts
		// 16: the root's prefixes are too few, so train/ is listed with
		// the delimiter, and then each class flat.
		o.Endpoint, o.ListConcurrency = p.endpoint(), 16
		b := f.open(t, o)
		got, err := walkEntries(t, b, "")
		var ae *azblob.Error
		if !errors.Is(err, azblob.ErrAuth) || !errors.As(err, &ae) || ae.Path != tc.path {
			t.Errorf("Walk with listings of %q refused = %v (after %d entries); want ErrAuth on path %q",
				tc.prefix, err, len(got), tc.path)
		}
		b.Close()
	}
}
