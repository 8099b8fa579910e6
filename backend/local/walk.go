package local

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
)

// walkWorkers bounds the directories read at once by Walk. Reading a cold
// directory is latency-bound (one fstatat per entry), so more workers than
// cores pay off on disks that serve requests in parallel.
const walkWorkers = 16

// Walk calls fn for every entry below dir, reading up to walkWorkers
// directories in parallel. Calls to fn never overlap, but they come from
// several goroutines and in no particular order; entries of one directory
// are reported together, sorted by name. Symbolic links to directories are
// reported, not descended into.
func (b *Backend) Walk(ctx context.Context, dir string, fn func(path string, e backend.Entry) error) error {
	rel, err := b.check(ctx, "walk", dir)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(walkWorkers)
	var (
		fnMu    sync.Mutex // serialises fn
		stopped bool       // guarded by fnMu: fn returned an error
	)
	var visit func(rel, path string) error
	visit = func(rel, path string) error {
		if err := gctx.Err(); err != nil {
			return pathErr("walk", path, err)
		}
		f, err := b.openDir(rel)
		if err != nil {
			return pathErr("walk", path, err)
		}
		entries, err := readDir(gctx, f)
		f.Close()
		if err != nil {
			return pathErr("walk", path, err)
		}
		for _, e := range entries {
			child := e.Name
			if path != "" {
				child = path + "/" + e.Name
			}
			fnMu.Lock()
			err := gctx.Err()
			if stopped {
				err = context.Canceled // the walk already failed; Wait reports why
			} else if err == nil {
				err = fn(child, e)
				stopped = err != nil
			}
			fnMu.Unlock()
			if err != nil {
				return err
			}
			if !e.IsDir() {
				continue
			}
			// Hand the subdirectory to a free worker, or read it here when
			// all are busy: the pool stays bounded and never deadlocks.
			if !g.TryGo(func() error { return visit(child, child) }) {
				if err := visit(child, child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	g.Go(func() error { return visit(rel, dir) })
	return g.Wait()
}
