package azblob

import (
	"context"
	"errors"
	iofs "io/fs"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stallfs/stallfs/backend"
)

// Modes of the entries: the tree is read-only.
const (
	fileMode = 0o444
	dirMode  = iofs.ModeDir | 0o555
)

// hnsFolderKey is the metadata that marks a directory blob of an account
// with a hierarchical namespace (ADLS Gen2) seen through the blob API.
const hnsFolderKey = "hdi_isfolder"

// checkPath validates a path of the contract: "" (the root) or a clean
// slash-separated relative path.
func checkPath(op, p string) error {
	if p == "" || (iofs.ValidPath(p) && p != ".") {
		return nil
	}
	return &iofs.PathError{Op: op, Path: p, Err: iofs.ErrInvalid}
}

// blobName is the blob name of path p.
func (b *Backend) blobName(p string) string { return b.prefix + p }

// dirPrefix is the listing prefix of directory dir ("" for the root).
func (b *Backend) dirPrefix(dir string) string {
	if dir == "" {
		return b.prefix
	}
	return b.prefix + dir + "/"
}

// normETag strips the quotes the service puts around ETags in headers.
func normETag(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return strings.Trim(string(*e), `"`)
}

// quoteETag is the If-Match form of a version.
func quoteETag(v string) *azcore.ETag {
	e := azcore.ETag(`"` + strings.Trim(v, `"`) + `"`)
	return &e
}

// isFolderBlob reports a directory blob: a "name/" marker or HNS folder.
func isFolderBlob(name string, size int64, md map[string]*string) bool {
	if strings.HasSuffix(name, "/") && size == 0 {
		return true
	}
	for k, v := range md {
		if strings.EqualFold(k, hnsFolderKey) && v != nil && strings.EqualFold(*v, "true") {
			return true
		}
	}
	return false
}

// validName reports whether rel (a name relative to the listed
// directory, possibly with slashes) can be served as a path.
func validName(rel string) bool {
	return rel != "" && rel != "." && iofs.ValidPath(rel) && !strings.ContainsRune(rel, 0)
}

func (b *Backend) fileEntry(name string, size int64, mtime *time.Time, etag *azcore.ETag) backend.Entry {
	e := backend.Entry{Name: name, Mode: fileMode, Size: size, Version: normETag(etag)}
	if mtime != nil {
		e.ModTime = *mtime
	}
	return e
}

func (b *Backend) dirEntry(name string) backend.Entry {
	return backend.Entry{Name: name, Mode: dirMode, ModTime: b.started}
}

// List returns the entries of directory dir, sorted by name, from a "/"
// hierarchy listing of every page.
func (b *Backend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	if err := checkPath("list", dir); err != nil {
		return nil, err
	}
	prefix := b.dirPrefix(dir)
	pager := b.client.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{
		Prefix: &prefix, Include: container.ListBlobsInclude{Metadata: true}, MaxResults: b.pageSize(),
	})
	dirs := map[string]bool{}
	var files []backend.Entry
	exists := dir == ""
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, translate("list", dir, err)
		}
		for _, p := range page.Segment.BlobPrefixes {
			exists = true
			rel := strings.TrimSuffix(strings.TrimPrefix(deref(p.Name), prefix), "/")
			if !validName(rel) || strings.Contains(rel, "/") {
				b.counters.skipped.Add(1)
				continue
			}
			dirs[rel] = true
		}
		for _, it := range page.Segment.BlobItems {
			exists = true
			name := deref(it.Name)
			rel := strings.TrimPrefix(name, prefix)
			size, mtime, etag := props(it)
			if isFolderBlob(name, size, it.Metadata) {
				if rel = strings.TrimSuffix(rel, "/"); rel != "" && validName(rel) {
					dirs[rel] = true
				}
				continue
			}
			if !validName(rel) {
				b.counters.skipped.Add(1)
				continue
			}
			files = append(files, b.fileEntry(rel, size, mtime, etag))
		}
	}
	if !exists {
		if err := b.missingDir(ctx, dir); err != nil {
			return nil, err
		}
		return []backend.Entry{}, nil
	}
	out := make([]backend.Entry, 0, len(dirs)+len(files))
	for name := range dirs {
		out = append(out, b.dirEntry(name))
	}
	for _, f := range files {
		if dirs[f.Name] {
			b.counters.skipped.Add(1) // "a" and "a/...": the directory wins
			continue
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y backend.Entry) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// missingDir explains an empty listing of dir: a file, a directory blob
// with nothing under it (an empty directory), or nothing.
func (b *Backend) missingDir(ctx context.Context, dir string) error {
	e, err := b.statBlob(ctx, dir)
	switch {
	case err == nil && e.IsDir():
		return nil
	case err == nil:
		return &iofs.PathError{Op: "list", Path: dir, Err: errors.New("not a directory")}
	case errors.Is(err, iofs.ErrNotExist):
		return &iofs.PathError{Op: "list", Path: dir, Err: iofs.ErrNotExist}
	default:
		return err
	}
}

// Stat returns the entry at p: the blob of that name, or a directory when
// blob names continue below it ("p/..."), which wins over a blob "p".
func (b *Backend) Stat(ctx context.Context, p string) (backend.Entry, error) {
	if err := checkPath("stat", p); err != nil {
		return backend.Entry{}, err
	}
	if p == "" {
		if err := ctx.Err(); err != nil {
			return backend.Entry{}, &Error{Op: "stat", Err: contextCause(err)}
		}
		return b.dirEntry(""), nil
	}
	isDir, err := b.hasChildren(ctx, p)
	if err != nil {
		return backend.Entry{}, err
	}
	if isDir {
		return b.dirEntry(baseName(p)), nil
	}
	e, err := b.statBlob(ctx, p)
	if err != nil {
		return backend.Entry{}, err
	}
	return e, nil
}

// statBlob reads the properties of blob p (a HEAD request).
func (b *Backend) statBlob(ctx context.Context, p string) (backend.Entry, error) {
	resp, err := b.client.NewBlobClient(b.blobName(p)).GetProperties(ctx, nil)
	if err != nil {
		err = translate("stat", p, err)
		if errors.Is(err, iofs.ErrNotExist) {
			return backend.Entry{}, &iofs.PathError{Op: "stat", Path: p, Err: iofs.ErrNotExist}
		}
		return backend.Entry{}, err
	}
	size := deref(resp.ContentLength)
	if isFolderBlob(p, size, resp.Metadata) {
		return b.dirEntry(baseName(p)), nil
	}
	return b.fileEntry(baseName(p), size, resp.LastModified, resp.ETag), nil
}

// hasChildren reports whether some blob name starts with "p/".
func (b *Backend) hasChildren(ctx context.Context, p string) (bool, error) {
	prefix := b.dirPrefix(p)
	pager := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix: &prefix, MaxResults: to32(1),
	})
	// The service may return an empty page with a continuation marker
	// (at a partition boundary); follow it.
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return false, translate("stat", p, err)
		}
		if len(page.Segment.BlobItems) > 0 { // any name, a lone "p/" marker too
			return true, nil
		}
	}
	return false, nil
}

func props(it *container.BlobItem) (size int64, mtime *time.Time, etag *azcore.ETag) {
	if it.Properties == nil {
		return 0, nil, nil
	}
	return deref(it.Properties.ContentLength), it.Properties.LastModified, it.Properties.ETag
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
