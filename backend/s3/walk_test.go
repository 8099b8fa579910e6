package s3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// walked is one fn call of a Walk.
type walked struct {
	path string
	e    backend.Entry
}

func walkEntries(t *testing.T, b *Backend, dir string) ([]walked, error) {
	t.Helper()
	var out []walked
	err := b.Walk(t.Context(), dir, func(p string, e backend.Entry) error {
		out = append(out, walked{p, e})
		return nil
	})
	return out, err
}

// putLayout stores an ImageNet-like tree of a few hundred small objects
// (train/ with 12 classes of 20, val/ with 4 of 10), names that sort
// around the slash, folder markers, and extra keys. It returns how many
// objects it stored.
func putLayout(t *testing.T, st *store, extra ...string) int {
	t.Helper()
	keys := []string{"README", "a-1", "a.txt", "m/", "n/", "n/file", "deep/1/2/3/4"}
	keys = append(keys, extra...)
	for c := range 12 {
		for i := range 20 {
			keys = append(keys, fmt.Sprintf("train/n%03d/img%04d.JPEG", c, i))
		}
	}
	for c := range 4 {
		for i := range 10 {
			keys = append(keys, fmt.Sprintf("val/n%03d/img%04d.JPEG", c, i))
		}
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, k := range keys {
		data := []byte(k)
		if k[len(k)-1] == '/' {
			data = nil
		}
		g.Go(func() error {
			_, err := st.client.PutObject(t.Context(), &awss3.PutObjectInput{
				Bucket:        aws.String(st.bucket),
				Key:           aws.String(normPrefix(st.prefix) + k),
				Body:          bytes.NewReader(data),
				ContentLength: aws.Int64(int64(len(data))),
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// checkParallelMatchesFlat walks st flat and in parallel, with pages of 7
// keys, and wants the same calls in the same order.
func checkParallelMatchesFlat(t *testing.T, st *store, objects int) {
	for _, dir := range []string{"", "train"} {
		flat := st.open(t, Options{ListConcurrency: 1})
		flat.listKeys = 7
		want, err := walkEntries(t, flat, dir)
		if err != nil {
			t.Fatalf("flat Walk(%q): %v", dir, err)
		}
		if dir == "" && len(want) < objects {
			t.Fatalf("flat Walk reported %d entries for %d objects", len(want), objects)
		}
		for _, conc := range []int{2, 16} {
			par := st.open(t, Options{ListConcurrency: conc})
			par.listKeys = 7
			got, err := walkEntries(t, par, dir)
			if err != nil {
				t.Fatalf("Walk(%q) with ListConcurrency %d: %v", dir, conc, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Walk(%q) with ListConcurrency %d reported %d entries, flat %d; first difference at %d",
					dir, conc, len(got), len(want), firstDiff(got, want))
			}
			if par.SkippedKeys() != flat.SkippedKeys() {
				t.Errorf("Walk(%q) with ListConcurrency %d skipped %d keys, flat %d", dir, conc, par.SkippedKeys(), flat.SkippedKeys())
			}
		}
	}
}

func firstDiff(a, b []walked) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestParallelWalkMatchesFlatVersitygw(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	st := newVersityStore(t, srv, "data/set")
	st.PutKey(t, "data/settle", []byte("beside the prefix"))
	checkParallelMatchesFlat(t, st, putLayout(t, st))
}

func TestParallelWalkMatchesFlatGofakes3(t *testing.T) {
	st := newFakeStore(t, "")
	// A file that is also a directory, and keys that are not paths:
	// skipped alike by both walks (versitygw's posix store cannot hold
	// them).
	n := putLayout(t, st, "a", "a/b", "x//y", "q/../r", "train/n003")
	checkParallelMatchesFlat(t, st, n/2)
}

// failListings is a proxy in front of endpoint that refuses, with
// AccessDenied, every listing whose prefix and delimiter are given.
func failListings(t *testing.T, endpoint, prefix, delimiter string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // the walk cancels the other listings
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Has("list-type") && q.Get("prefix") == prefix && q.Get("delimiter") == delimiter {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+
				`<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>test</RequestId></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestParallelWalkFailingPrefixFailsWalk(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	st := newVersityStore(t, srv, "")
	putLayout(t, st)
	for _, tc := range []struct {
		prefix, delimiter, path string
	}{
		{"train/n007/", "", "train/n007"}, // a class, listed flat
		{"train/", "/", "train"},          // a level of the plan
	} {
		// 16: the root's 5 prefixes are too few, so train/ is listed
		// with the delimiter, and then each class flat.
		b := st.open(t, Options{Endpoint: failListings(t, st.endpoint, tc.prefix, tc.delimiter), ListConcurrency: 16})
		got, err := walkEntries(t, b, "")
		var pe *iofs.PathError
		if !errors.Is(err, ErrAccessDenied) || !errors.As(err, &pe) || pe.Path != tc.path {
			t.Errorf("Walk with listings of %q refused = %v (after %d entries); want AccessDenied on path %q",
				tc.prefix, err, len(got), tc.path)
		}
	}
}
