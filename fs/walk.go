package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
)

// listAll reads the whole source: the entries of every directory, keyed by
// directory path ("" is the root). It uses the backend's Walker when there
// is one, else lists directories with at most parallel concurrent calls.
func listAll(ctx context.Context, b backend.Backend, parallel int) (map[string][]backend.Entry, error) {
	if w, ok := b.(backend.Walker); ok {
		return walkAll(ctx, w)
	}
	var (
		mu  sync.Mutex
		out = map[string][]backend.Entry{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var visit func(dir string) error
	visit = func(dir string) error {
		ents, err := b.List(gctx, dir)
		if err != nil {
			return fmt.Errorf("list %q: %w", dir, err)
		}
		mu.Lock()
		out[dir] = ents
		mu.Unlock()
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			child := path.Join(dir, e.Name)
			f := func() error { return visit(child) }
			// A full group runs the child here instead of blocking, so
			// recursion never waits on a slot it holds itself.
			if !g.TryGo(f) {
				if err := f(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	g.Go(func() error { return visit("") })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// walkAll groups a Walker's flat listing by directory and adds directories
// that the walk implied (an object under a/b/) but did not report.
func walkAll(ctx context.Context, w backend.Walker) (map[string][]backend.Entry, error) {
	out := map[string][]backend.Entry{"": nil}
	dirs := map[string]bool{"": true}
	err := w.Walk(ctx, "", func(p string, e backend.Entry) error {
		parent := path.Dir(p)
		if parent == "." {
			parent = ""
		}
		if e.Name == "" {
			e.Name = path.Base(p)
		}
		out[parent] = append(out[parent], e)
		if e.IsDir() {
			dirs[p] = true
			if _, ok := out[p]; !ok {
				out[p] = nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	for d := range out {
		for d != "" && !dirs[d] {
			dirs[d] = true
			parent := path.Dir(d)
			if parent == "." {
				parent = ""
			}
			out[parent] = append(out[parent], backend.Entry{Name: path.Base(d), Mode: iofs.ModeDir | 0o555})
			d = parent
		}
	}
	return out, nil
}
