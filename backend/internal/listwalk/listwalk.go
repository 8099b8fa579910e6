// Package listwalk is the parallel walk of a flat object store (S3, Azure
// Blob), shared by backend/s3 and backend/azblob: each gives it a
// delimited level listing and a flat paginated listing (Spec), and Walk
// reports every key below a root in the order of one flat listing.
package listwalk

// The parallel walk, in two steps. planWalk lists the top levels of the
// subtree with the "/" delimiter and cuts the subtree's keys into
// segments in listing order: runs of keys already listed (a level's own
// objects) and prefixes still to be listed. runSegments lists those
// prefixes flat, several at once, and hands every key to the caller in the
// order one flat listing of the whole subtree would have: all keys that
// start with a prefix are adjacent in a byte-ordered listing, and they sit
// where the prefix itself sorts among its level's names. When the first
// prefixes turn out to hold less than a page together (many tiny
// directories), the rest of the walk is one flat listing again, so a walk
// never costs much more than the flat listing it replaces.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Limits of the plan.
const (
	// planDepth is how many levels below the walked directory may be
	// listed with the delimiter: enough for train/CLASS/ under a root.
	planDepth = 3
	// levelObjects and levelPrefixes bound one level's delimited listing.
	// A level with more objects is listed flat (its objects would have to
	// be held until their turn); a level with more prefixes than this is
	// many small directories, where one request per prefix costs more
	// than the flat listing's pages of 1,000 keys.
	levelObjects  = 10_000
	levelPrefixes = 10_000
	// pagesAhead is how many listed pages a prefix ahead of the one being
	// reported may hold before its lister waits: at most conc x
	// (pagesAhead+1) pages are held at once.
	pagesAhead = 2
)

// segment is a run of the walk's keys in listing order: objs, listed
// already, or every key below prefix, still to list (list is true).
type segment[O any] struct {
	objs   []O
	prefix string
	list   bool
	flat   bool // a list segment whose level was too large to plan
}

// LevelFunc lists the level prefix with the "/" delimiter: the objects
// directly at it and its common prefixes (each ending in "/"). It gives up
// with ok false, listing no further, once the level holds more than
// maxObjs objects or maxPrefixes prefixes.
type LevelFunc[O any] func(ctx context.Context, prefix string, maxObjs, maxPrefixes int) (objs []O, prefixes []string, ok bool, err error)

// FlatFunc lists every key below prefix, without a delimiter, and passes
// each page to page in order; it stops with page's error.
//
// The errors of LevelFunc and FlatFunc name the prefix that failed; the
// walk returns them as they are.
type FlatFunc[O any] func(ctx context.Context, prefix string, page func([]O) error) error

// planWalk cuts the keys below root into segments, listing up to
// planDepth levels with level, each level's prefixes in parallel (at most
// conc at once), until there are at least conc prefixes to list. A plan of
// one segment, root itself, is one flat listing.
func planWalk[O any](ctx context.Context, root string, conc int, level LevelFunc[O], key func(O) string) ([]segment[O], error) {
	segs := []segment[O]{{prefix: root, list: true}}
	for depth := range planDepth {
		n, open := 0, 0
		for _, s := range segs {
			if s.list {
				n++
				if !s.flat {
					open++
				}
			}
		}
		if open == 0 || depth > 0 && n >= conc {
			break
		}
		levels := make([][]segment[O], len(segs)) // nil: not listed this round
		var expanded atomic.Bool
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(conc)
		for i, s := range segs {
			if !s.list || s.flat {
				continue
			}
			g.Go(func() error {
				objs, prefixes, ok, err := level(gctx, s.prefix, levelObjects, levelPrefixes)
				if err != nil {
					return err
				}
				if !ok {
					s.flat = true
					levels[i] = []segment[O]{s}
					return nil
				}
				expanded.Store(true)
				levels[i] = mergeLevel(objs, prefixes, key)
				if levels[i] == nil {
					levels[i] = []segment[O]{} // an empty level
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		if !expanded.Load() {
			break // every level was too large to hold: list them flat
		}
		var next []segment[O]
		for i, s := range segs {
			if levels[i] == nil {
				next = appendSegment(next, s)
				continue
			}
			for _, l := range levels[i] {
				next = appendSegment(next, l)
			}
		}
		segs = next
	}
	return segs, nil
}

// mergeLevel orders one level's objects and prefixes as a flat listing
// would meet them. An object below one of the prefixes (a store that did
// not fold it) is left to that prefix's listing, and a name that a store
// repeats on two pages (gofakes3 repeats a common prefix that spans a page
// boundary) is kept once.
func mergeLevel[O any](objs []O, prefixes []string, key func(O) string) []segment[O] {
	slices.SortStableFunc(objs, func(a, b O) int { return cmp.Compare(key(a), key(b)) })
	objs = slices.CompactFunc(objs, func(a, b O) bool { return key(a) == key(b) })
	slices.Sort(prefixes)
	prefixes = slices.Compact(prefixes)
	var out []segment[O]
	i := 0
	for _, p := range prefixes {
		for ; i < len(objs) && key(objs[i]) < p; i++ {
			out = appendObject(out, objs[i])
		}
		for ; i < len(objs) && strings.HasPrefix(key(objs[i]), p); i++ {
		}
		out = append(out, segment[O]{prefix: p, list: true})
	}
	for ; i < len(objs); i++ {
		out = appendObject(out, objs[i])
	}
	return out
}

func appendObject[O any](segs []segment[O], o O) []segment[O] {
	if n := len(segs); n > 0 && !segs[n-1].list {
		segs[n-1].objs = append(segs[n-1].objs, o)
		return segs
	}
	return append(segs, segment[O]{objs: []O{o}})
}

func appendSegment[O any](segs []segment[O], s segment[O]) []segment[O] {
	if s.list {
		return append(segs, s)
	}
	for _, o := range s.objs {
		segs = appendObject(segs, o)
	}
	return segs
}

// Spec is what the parallel walk needs from a store.
type Spec[O any] struct {
	Root     string // the key prefix of the walked directory
	Conc     int    // listings at once
	PageKeys int    // keys in a full page of a flat listing
	Level    LevelFunc[O]
	Flat     FlatFunc[O]
	Key      func(O) string // an object's key
}

// Walk calls emit for every key below spec.Root, in the order of
// one flat listing of it, from the calling goroutine only: planWalk, then
// runSegments. When the prefixes turn out to be too small to pay for a
// request each, the rest of the walk is one flat listing after all.
func Walk[O any](ctx context.Context, spec Spec[O], emit func(O) error) error {
	segs, err := planWalk(ctx, spec.Root, spec.Conc, spec.Level, spec.Key)
	if err != nil {
		return err
	}
	from, rest, err := runSegments(ctx, spec, segs, emit)
	if err != nil || !rest {
		return err
	}
	// Every key before from has been reported.
	return spec.Flat(ctx, spec.Root, func(objs []O) error {
		for _, o := range objs {
			if spec.Key(o) < from {
				continue
			}
			if err := emit(o); err != nil {
				return err
			}
		}
		return nil
	})
}

// errFlatRest stops the prefix listings when the walk turns flat.
var errFlatRest = errors.New("prefixes too small: listing the rest flat")

// runSegments lists the prefixes of segs with spec.Flat, at most conc at
// once and at most conc ahead of the segment being reported, and calls
// emit for every object in segment order, from the calling goroutine
// only. The first error (a listing's or emit's) stops every listing and
// is returned once they have all returned.
//
// Once the first conc prefixes are reported, if they held fewer keys
// than one flat page, one request per prefix costs more than the flat
// listing would (a page per pageKeys keys, one after the other): it stops
// and returns rest true and the key from which the flat listing must go
// on (everything before it has been reported).
func runSegments[O any](ctx context.Context, spec Spec[O], segs []segment[O], emit func(O) error) (from string, rest bool, err error) {
	conc := spec.Conc
	ctx, cancel := context.WithCancelCause(ctx)
	type flight struct {
		pages chan []O
		err   error // set before pages is closed
	}
	flights := make([]*flight, len(segs))
	lists := 0
	for i, s := range segs {
		if s.list {
			flights[i] = &flight{pages: make(chan []O, pagesAhead)}
			lists++
		}
	}
	// A slot is taken, in segment order, before a prefix is listed, and
	// given back once its keys are reported: listers never run more than
	// conc segments ahead of the reader, so what they buffer is bounded.
	slots := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // runs first: stops the listers, then wait for them
	wg.Go(func() {
		for i, s := range segs {
			if !s.list {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			f := flights[i]
			wg.Go(func() {
				defer close(f.pages)
				err := spec.Flat(ctx, s.prefix, func(objs []O) error {
					select {
					case f.pages <- objs:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
				if err != nil {
					f.err = err
					cancel(err) // fail fast; the reader reports the cause
				}
			})
		}
	})
	listed, keys := 0, 0 // prefixes reported, and their keys
	for i, s := range segs {
		if !s.list {
			for _, o := range s.objs {
				if err := emit(o); err != nil {
					return "", false, err
				}
			}
			continue
		}
		if listed == conc && keys < spec.PageKeys && lists-listed >= conc {
			cancel(errFlatRest)
			return s.prefix, true, nil
		}
		f := flights[i]
		for {
			var (
				objs []O
				more bool
			)
			select {
			case objs, more = <-f.pages:
			case <-ctx.Done():
				return "", false, context.Cause(ctx)
			}
			if !more {
				break
			}
			keys += len(objs)
			for _, o := range objs {
				if err := emit(o); err != nil {
					return "", false, err
				}
			}
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return "", false, context.Cause(ctx) // the first failure, not a listing it cancelled
			}
			return "", false, f.err
		}
		listed++
		<-slots
	}
	return "", false, nil
}
