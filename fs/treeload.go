package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
)

// DirTimesBackend is an optional interface of a Backend. A backend whose
// directories' modification times change whenever an entry is added to,
// removed from or renamed within them (a POSIX file system) implements it
// and returns true; a persisted tree of such a source is then validated at
// mount by one Stat per directory instead of a background re-list (see
// Options.MetadataFile).
type DirTimesBackend interface {
	DirTimesTrackEntries() bool
}

// modifiedMargin is how close to the start of a listing a directory's
// modification time may be before the listing no longer proves that it
// saw the directory's content at that time: file systems stamp times at a
// granularity of up to 2 s (FAT; 1 s on ext3), so an entry added in the
// same tick after the directory was read leaves the time unchanged.
const modifiedMargin = 2 * time.Second

// readTree lists the source and lays it out, or loads the tree persisted at
// Options.MetadataFile when it is of this source and still valid (see
// Options.MetadataFile for how validity is decided).
func readTree(ctx context.Context, b backend.Backend, opts Options) (*tree, error) {
	log := opts.Logger
	if opts.MetadataFile == "" {
		t, _, err := listTree(ctx, b, opts)
		return t, err
	}
	start := time.Now()
	tf, err := loadTree(opts.MetadataFile, b.String())
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		log.Info("no persisted metadata; listing the source", "file", opts.MetadataFile)
	case err != nil:
		log.Warn("persisted metadata ignored; listing the source", "err", err)
	case dirTimesTracked(b, opts):
		changed, err := dirTimesChanged(ctx, b, tf, opts.ListParallel)
		if err == nil && changed == "" {
			log.Info("tree loaded from persisted metadata (directory times unchanged)", "file", opts.MetadataFile,
				"files", tf.t.files(), "dirs", len(tf.t.dirs), "took", time.Since(start))
			return tf.t, nil
		}
		if err != nil {
			changed = err.Error()
		}
		log.Info("persisted metadata out of date; listing the source", "reason", changed)
	default:
		log.Info("tree loaded from persisted metadata; re-listing in the background", "file", opts.MetadataFile,
			"files", tf.t.files(), "dirs", len(tf.t.dirs), "took", time.Since(start))
		go relist(ctx, b, opts, tf)
		return tf.t, nil
	}
	t, listedAt, err := listTree(ctx, b, opts)
	if err != nil {
		return nil, err
	}
	saved := time.Now()
	if err := saveTree(opts.MetadataFile, b.String(), listedAt, t); err != nil {
		log.Warn("persisting metadata failed; the next mount lists again", "err", err)
	} else {
		log.Info("tree listed and persisted", "file", opts.MetadataFile, "files", t.files(), "dirs", len(t.dirs),
			"list", saved.Sub(time.Unix(0, listedAt)), "save", time.Since(saved))
	}
	return t, nil
}

// listTree lists the source and lays it out; listedAt is when the listing
// began (unix ns).
func listTree(ctx context.Context, b backend.Backend, opts Options) (t *tree, listedAt int64, err error) {
	listedAt = time.Now().UnixNano()
	root, err := b.Stat(ctx, "")
	if err != nil {
		// Object stores may have no entry for the root prefix; the
		// listing below still reports a missing source.
		root = backend.Entry{Mode: 0o555, ModTime: time.Now()}
	}
	listing, err := listAll(ctx, b, opts.ListParallel)
	if err != nil {
		return nil, 0, err
	}
	t, err = buildTree(root, listing)
	return t, listedAt, err
}

// dirTimesTracked reports whether directory times validate a persisted
// tree of b.
func dirTimesTracked(b backend.Backend, opts Options) bool {
	if opts.MetadataDirTimes {
		return true
	}
	d, ok := b.(DirTimesBackend)
	return ok && d.DirTimesTrackEntries()
}

// dirTimesChanged stats every directory of the persisted tree (at most
// parallel at once) and returns why the tree is out of date, or "" when
// every directory still has the modification time it had when listed and
// none was modified too close to the listing to tell.
func dirTimesChanged(ctx context.Context, b backend.Backend, tf *persistedTree, parallel int) (string, error) {
	t := tf.t
	for di, d := range t.dirs {
		if mt := t.ents[d.ent].mtime; mt > tf.listedAt-int64(modifiedMargin) {
			return fmt.Sprintf("directory %q was modified during or after the listing (or within %v before it)", t.pathOf(t.dirs[di].ent), modifiedMargin), nil
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	errChanged := errors.New("changed")
	var reason string // set by the goroutine that wins first
	first := make(chan struct{}, 1)
	for di := range t.dirs {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			p := t.pathOf(t.dirs[di].ent)
			e, err := b.Stat(gctx, p)
			why := ""
			switch {
			case errors.Is(err, iofs.ErrNotExist):
				why = fmt.Sprintf("directory %q is gone", p)
			case err != nil:
				return fmt.Errorf("stat %q: %w", p, err)
			case !e.IsDir():
				why = fmt.Sprintf("%q is no longer a directory", p)
			case e.ModTime.UnixNano() != t.ents[t.dirs[di].ent].mtime:
				why = fmt.Sprintf("directory %q changed", p)
			default:
				return nil
			}
			select {
			case first <- struct{}{}:
				reason = why
			default:
			}
			return errChanged
		})
	}
	err := g.Wait()
	switch {
	case errors.Is(err, errChanged):
		return reason, nil
	case err != nil:
		return "", err
	}
	return "", nil
}

// relist lists the source again while the mount serves the persisted tree
// tf, logs what changed (a stale object's reads fail with ErrStale, added
// ones appear after a remount) and persists the new listing. It runs under
// the ctx given to New and gives up quietly when it ends.
func relist(ctx context.Context, b backend.Backend, opts Options, tf *persistedTree) {
	log := opts.Logger
	start := time.Now()
	t, listedAt, err := listTree(ctx, b, opts)
	if err != nil {
		if ctx.Err() != nil {
			log.Debug("background re-list stopped", "err", err)
		} else {
			log.Warn("background re-list failed; serving the persisted metadata", "err", err)
		}
		return
	}
	d := diffTrees(tf.t, t)
	if d.none() {
		log.Info("background re-list: persisted metadata is current", "files", t.files(), "took", time.Since(start))
		return
	}
	log.Warn("source changed since its metadata was persisted; remount to see the changes (reads of changed files fail as stale)",
		slog.Int("added", d.added), slog.Int("removed", d.removed), slog.Int("changed", d.changed),
		slog.Duration("took", time.Since(start)))
	if err := saveTree(opts.MetadataFile, b.String(), listedAt, t); err != nil {
		log.Warn("persisting re-listed metadata failed", "err", err)
		return
	}
	log.Info("re-listed metadata persisted for the next mount", "file", opts.MetadataFile)
}
