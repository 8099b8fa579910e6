package s3

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/internal/listwalk"
)

// Walk reports every entry below dir: each file, each folder marker, and
// once each directory implied by a key's path, before the first entry
// below it. Keys that cannot be paths are skipped and counted, and so is
// every key below a name that is also a file (List lists such a name as
// the file). fn is called from Walk's goroutine only, one call at a time.
//
// The keys come in the order of one flat, paginated ListObjectsV2 of the
// subtree (no delimiter), and the walk relies on it (S3 guarantees byte
// order): all keys starting with a given string are adjacent, so a file
// "a" is seen before any "a/..." key, and the files that can still shadow
// a directory form a stack of prefixes of the current key.
//
// With Options.ListConcurrency above 1 the same keys are listed faster:
// the top levels of the subtree are listed with the "/" delimiter (see
// planWalk), then their prefixes flat, several at once, and the keys are
// handed on in the flat listing's order. A failed listing of any prefix
// fails the walk with its cause.
func (b *Backend) Walk(ctx context.Context, dir string, fn func(path string, e backend.Entry) error) error {
	if err := checkPath("walk", dir); err != nil {
		return err
	}
	pfx := b.dirPrefix(dir)
	w := walker{b: b, fn: fn, base: dir, seen: map[string]bool{}}
	found := dir == ""
	emit := func(o types.Object) error {
		found = true
		return w.object(pfx, o)
	}
	var err error
	if b.listConc <= 1 {
		err = b.listFlat(ctx, pfx, func(objs []types.Object) error {
			for _, o := range objs {
				if err := emit(o); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = listwalk.Walk(ctx, listwalk.Spec[types.Object]{
			Root: pfx, Conc: b.listConc, PageKeys: b.pageKeys(),
			Level: b.listLevel, Flat: b.listFlat, Key: objectKey,
		}, emit)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return translate("walk", dir, err) // cancelled by the caller
		}
		return err
	}
	if !found {
		return b.notDir(ctx, dir)
	}
	return nil
}

// prefixPath is the path of the directory whose keys start with prefix
// (a directory prefix: the Backend's prefix, then "" or a path and "/").
func (b *Backend) prefixPath(prefix string) string {
	return strings.TrimSuffix(strings.TrimPrefix(prefix, b.prefix), "/")
}

// pageKeys is the number of keys in a full page of Walk's listings.
func (b *Backend) pageKeys() int {
	if b.listKeys <= 0 {
		return 1000 // S3's maximum and default
	}
	return int(b.listKeys)
}

func (b *Backend) maxKeys() *int32 {
	if b.listKeys <= 0 {
		return nil
	}
	return aws.Int32(b.listKeys)
}

func objectKey(o types.Object) string { return aws.ToString(o.Key) }

// listFlat lists every key below prefix, without a delimiter, a page at a
// time.
func (b *Backend) listFlat(ctx context.Context, prefix string, page func([]types.Object) error) error {
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket:  aws.String(b.bucket),
		Prefix:  aws.String(prefix),
		MaxKeys: b.maxKeys(),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return translate("walk", b.prefixPath(prefix), err)
		}
		if err := page(out.Contents); err != nil {
			return err
		}
	}
	return nil
}

// listLevel lists the level prefix with the "/" delimiter (a listwalk.LevelFunc).
func (b *Backend) listLevel(ctx context.Context, prefix string, maxObjs, maxPrefixes int) ([]types.Object, []string, bool, error) {
	var (
		objs     []types.Object
		prefixes []string
	)
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket:    aws.String(b.bucket),
		Prefix:    aws.String(prefix),
		Delimiter: aws.String("/"),
		MaxKeys:   b.maxKeys(),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, false, translate("walk", b.prefixPath(prefix), err)
		}
		objs = append(objs, out.Contents...)
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
		if len(objs) > maxObjs || len(prefixes) > maxPrefixes {
			return nil, nil, false, nil
		}
	}
	return objs, prefixes, true, nil
}

// walker holds the state of one Walk.
type walker struct {
	b    *Backend
	fn   func(path string, e backend.Entry) error
	base string          // the walked dir, "" for the root
	seen map[string]bool // directories reported, relative to base
	// files are the file names (relative to base) that are prefixes of
	// the last key, shortest first.
	files []string
}

func (w *walker) full(rel string) string {
	if w.base == "" {
		return rel
	}
	return w.base + "/" + rel
}

func (w *walker) object(pfx string, o types.Object) error {
	key := aws.ToString(o.Key)
	rel := strings.TrimPrefix(key, pfx)
	marker := strings.HasSuffix(rel, "/")
	rel = strings.TrimSuffix(rel, "/")
	if rel == "" && marker {
		return nil // the walked directory's own folder marker
	}
	if !validPath(rel) {
		w.b.skip(key)
		// List shows the valid directories on the way to the key (as
		// common prefixes), so Walk does too.
		return w.leadingDirs(rel)
	}
	w.popFiles(rel)
	for _, f := range w.files {
		if len(rel) > len(f) && rel[len(f)] == '/' || marker && rel == f {
			w.b.skip(key) // below a name that is a file
			return nil
		}
	}
	// Report the directories on the way, outermost first.
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		if err := w.dir(rel[:i]); err != nil {
			return err
		}
	}
	if marker {
		return w.dir(rel)
	}
	w.files = append(w.files, rel)
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	return w.fn(w.full(rel), fileEntry(name, aws.ToInt64(o.Size), o.LastModified, o.ETag))
}

func (w *walker) dir(rel string) error {
	if w.seen[rel] {
		return nil
	}
	w.seen[rel] = true
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	return w.fn(w.full(rel), dirEntry(name))
}

// leadingDirs reports the directories of rel's leading valid segments
// (none when the first is invalid), unless a file shadows them.
func (w *walker) leadingDirs(rel string) error {
	end := 0
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		if !validPath(rel[:i]) {
			break
		}
		end = i
	}
	if end == 0 {
		return nil
	}
	w.popFiles(rel)
	for _, f := range w.files {
		if len(f) < end && rel[len(f)] == '/' || f == rel[:end] {
			return nil
		}
	}
	for i := 0; i <= end; i++ {
		if i == end || rel[i] == '/' {
			if err := w.dir(rel[:i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// popFiles drops the files that are not prefixes of rel.
func (w *walker) popFiles(rel string) {
	for len(w.files) > 0 && !strings.HasPrefix(rel, w.files[len(w.files)-1]) {
		w.files = w.files[:len(w.files)-1]
	}
}
