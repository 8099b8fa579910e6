package azblob

import (
	"context"
	"errors"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/internal/listwalk"
)

// Walk calls fn for every entry below dir, synthesising each directory
// the first time a descendant names it. fn is called from Walk's goroutine
// only, one call at a time.
//
// The names come in the order of ONE flat listing of the subtree (5,000
// names a page). A blob "x" is held back until the listing has passed
// every name that could start with "x/" (names arrive in order, so that is
// soon: at the next name that sorts after "x/"): if some name does, "x" is
// a directory and the blob is skipped and counted, as List does.
//
// With Options.ListConcurrency above 1 the same names are listed faster:
// the top levels of the subtree are listed with the "/" delimiter (see
// planWalk), then their prefixes flat, several at once, and the names are
// handed on in the flat listing's order. A failed listing of any prefix
// fails the walk with its cause.
func (b *Backend) Walk(ctx context.Context, dir string, fn func(path string, e backend.Entry) error) error {
	if err := checkPath("walk", dir); err != nil {
		return err
	}
	w := walker{b: b, fn: fn, dir: dir, seen: map[string]bool{}}
	prefix := b.dirPrefix(dir)
	found := dir == ""
	skippedBefore := b.counters.skipped.Load()
	emit := func(it *container.BlobItem) error {
		found = true
		return w.blob(strings.TrimPrefix(deref(it.Name), prefix), it)
	}
	var err error
	if conc := b.opts.ListConcurrency; conc <= 1 {
		err = b.listFlat(ctx, prefix, func(items []*container.BlobItem) error {
			for _, it := range items {
				if err := emit(it); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = listwalk.Walk(ctx, listwalk.Spec[*container.BlobItem]{
			Root: prefix, Conc: conc, PageKeys: b.pageKeys(),
			Level: b.listLevel, Flat: b.listFlat, Key: blobKey,
		}, emit)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return translate("walk", dir, err) // cancelled by the caller
		}
		return err
	}
	if err := w.flush(""); err != nil {
		return err
	}
	if n := b.counters.skipped.Load() - skippedBefore; n > 0 {
		b.opts.Logger.Warn("blob names skipped: not valid paths, or shadowed by a directory of the same name",
			"source", b.name, "dir", dir, "skipped", n)
	}
	if !found {
		if err := b.missingDir(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

// pageKeys is the number of names in a full page of Walk's listings.
func (b *Backend) pageKeys() int {
	if n := b.pageSize(); n != nil {
		return int(*n)
	}
	return 5000 // the service's maximum and default
}

func blobKey(it *container.BlobItem) string { return deref(it.Name) }

// prefixPath is the path of the directory whose names start with prefix
// (a directory prefix: the Backend's prefix, then "" or a path and "/").
func (b *Backend) prefixPath(prefix string) string {
	return strings.TrimSuffix(strings.TrimPrefix(prefix, b.prefix), "/")
}

// listFlat lists every blob below prefix, without a delimiter, a page at
// a time (a listwalk.FlatFunc).
func (b *Backend) listFlat(ctx context.Context, prefix string, page func([]*container.BlobItem) error) error {
	pager := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix: &prefix, Include: container.ListBlobsInclude{Metadata: true}, MaxResults: b.pageSize(),
	})
	for pager.More() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			return translate("walk", b.prefixPath(prefix), err)
		}
		if err := page(out.Segment.BlobItems); err != nil {
			return err
		}
	}
	return nil
}

// listLevel lists the level prefix with the "/" delimiter (a listwalk.LevelFunc).
func (b *Backend) listLevel(ctx context.Context, prefix string, maxObjs, maxPrefixes int) ([]*container.BlobItem, []string, bool, error) {
	var (
		items    []*container.BlobItem
		prefixes []string
	)
	pager := b.client.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{
		Prefix: &prefix, Include: container.ListBlobsInclude{Metadata: true}, MaxResults: b.pageSize(),
	})
	for pager.More() {
		out, err := pager.NextPage(ctx)
		if err != nil {
			return nil, nil, false, translate("walk", b.prefixPath(prefix), err)
		}
		items = append(items, out.Segment.BlobItems...)
		for _, p := range out.Segment.BlobPrefixes {
			prefixes = append(prefixes, deref(p.Name))
		}
		if len(items) > maxObjs || len(prefixes) > maxPrefixes {
			return nil, nil, false, nil
		}
	}
	return items, prefixes, true, nil
}

// walker is the state of one Walk.
type walker struct {
	b       *Backend
	fn      func(string, backend.Entry) error
	dir     string
	seen    map[string]bool // directories reported (relative to dir)
	pending []pendingFile   // blobs that may still turn out to be directories
}

type pendingFile struct {
	rel string
	e   backend.Entry
}

// blob handles one listed blob; rel is its name relative to dir.
func (w *walker) blob(rel string, it *container.BlobItem) error {
	size, mtime, etag := props(it)
	folder := isFolderBlob(rel, size, it.Metadata)
	if folder {
		rel = strings.TrimSuffix(rel, "/")
		if rel == "" { // the marker of dir itself
			return nil
		}
	}
	if err := w.flush(rel); err != nil {
		return err
	}
	if !validName(rel) {
		w.b.counters.skipped.Add(1)
		// Its valid leading directories exist all the same, as List
		// shows them: "x" of "x//y".
		return w.parents(validDirs(rel))
	}
	if err := w.parents(rel); err != nil {
		return err
	}
	if folder {
		return w.directory(rel)
	}
	e := w.b.fileEntry(baseName(rel), size, mtime, etag)
	w.pending = append(w.pending, pendingFile{rel: rel, e: e})
	return nil
}

// flush reports the pending files that the name next (in listing order)
// proves to be files, and drops those it proves to be directories. next ""
// flushes everything (the end of the listing).
func (w *walker) flush(next string) error {
	keep := w.pending[:0]
	for _, p := range w.pending {
		switch {
		case next != "" && strings.HasPrefix(next, p.rel+"/"):
			w.b.counters.skipped.Add(1) // "p" and "p/...": the directory wins
		case next != "" && next <= p.rel+"/":
			keep = append(keep, p) // "p-1" or "p.x" come before "p/..."
		case w.seen[p.rel]:
			w.b.counters.skipped.Add(1) // a directory blob of the same name
		default:
			if err := w.fn(w.path(p.rel), p.e); err != nil {
				return err
			}
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	return nil
}

// parents reports the directories above rel not yet reported.
func (w *walker) parents(rel string) error {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			if err := w.directory(rel[:i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// directory reports directory rel once.
func (w *walker) directory(rel string) error {
	if w.seen[rel] {
		return nil
	}
	w.seen[rel] = true
	return w.fn(w.path(rel), w.b.dirEntry(baseName(rel)))
}

// validDirs is the longest run of valid leading segments of rel, each
// followed by its slash ("x/" of "x//y", "" of "./z").
func validDirs(rel string) string {
	end := 0
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		if !validName(rel[:i]) {
			break
		}
		end = i + 1
	}
	return rel[:end]
}

func (w *walker) path(rel string) string {
	if w.dir == "" {
		return rel
	}
	return w.dir + "/" + rel
}
