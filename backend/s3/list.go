package s3

import (
	"context"
	"errors"
	iofs "io/fs"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stallfs/stallfs/backend"
)

// Permission bits reported for every entry: the mount is read-only.
const (
	fileMode = 0o444
	dirMode  = iofs.ModeDir | 0o555
)

// maxNameLen is the longest name the kernel accepts (NAME_MAX).
const maxNameLen = 255

// validPath reports whether rel, a key with the prefix removed (and the
// trailing slash of a folder marker removed), can be a path.
func validPath(rel string) bool {
	if rel == "" || strings.IndexByte(rel, 0) >= 0 {
		return false
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "" || seg == "." || seg == ".." || len(seg) > maxNameLen {
			return false
		}
	}
	return true
}

// skip counts a key that cannot be a path and logs the first one.
func (b *Backend) skip(key string) {
	b.skipped.Add(1)
	b.skipOnce.Do(func() {
		b.log.Warn("s3: skipping keys that cannot be paths (empty segment, '.', '..', NUL or a name over 255 bytes); counted, logged once",
			"source", b.name, "first", key)
	})
}

// checkPath rejects paths that no listing could have produced.
func checkPath(op, p string) error {
	if p == "" || validPath(p) {
		return nil
	}
	return &iofs.PathError{Op: op, Path: p, Err: iofs.ErrInvalid}
}

// dirPrefix returns the key prefix of the children of directory dir.
func (b *Backend) dirPrefix(dir string) string {
	if dir == "" {
		return b.prefix
	}
	return b.prefix + dir + "/"
}

func fileEntry(name string, size int64, mtime *time.Time, etag *string) backend.Entry {
	e := backend.Entry{Name: name, Mode: fileMode, Size: size, Version: normETag(etag)}
	if mtime != nil {
		// Listings give milliseconds, HEAD gives seconds (an HTTP date):
		// keep what both agree on.
		e.ModTime = mtime.UTC().Truncate(time.Second)
	}
	return e
}

func dirEntry(name string) backend.Entry {
	return backend.Entry{Name: name, Mode: dirMode}
}

// List returns the entries of directory dir from a "/"-delimited,
// paginated ListObjectsV2: objects are files, common prefixes and folder
// markers ("name/" keys) are directories. A name that is both a file and
// a directory is listed as the file (Stat agrees, since it asks for the
// object first). A dir with no keys below it does not exist, except the
// root.
func (b *Backend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	if err := checkPath("list", dir); err != nil {
		return nil, err
	}
	pfx := b.dirPrefix(dir)
	files := map[string]backend.Entry{}
	dirs := map[string]bool{}
	exists := dir == ""
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket:    aws.String(b.bucket),
		Prefix:    aws.String(pfx),
		Delimiter: aws.String("/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, translate("list", dir, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			exists = true
			name := strings.TrimPrefix(key, pfx)
			if name == "" {
				continue // the directory's own folder marker
			}
			if i := strings.IndexByte(name, '/'); i >= 0 {
				// A key below a child (a child's folder marker, for one)
				// that the store did not fold into CommonPrefixes.
				if validPath(name[:i]) {
					dirs[name[:i]] = true
				}
				continue
			}
			if !validPath(name) {
				b.skip(key)
				continue
			}
			files[name] = fileEntry(name, aws.ToInt64(o.Size), o.LastModified, o.ETag)
		}
		for _, cp := range page.CommonPrefixes {
			key := aws.ToString(cp.Prefix)
			exists = true
			name := strings.TrimSuffix(strings.TrimPrefix(key, pfx), "/")
			if !validPath(name) {
				b.skip(key)
				continue
			}
			dirs[name] = true
		}
	}
	if !exists {
		return nil, b.notDir(ctx, dir)
	}
	out := make([]backend.Entry, 0, len(files)+len(dirs))
	for _, e := range files {
		out = append(out, e)
	}
	for name := range dirs {
		if _, ok := files[name]; ok {
			b.skip(b.dirPrefix(dir) + name + "/")
			continue
		}
		out = append(out, dirEntry(name))
	}
	slices.SortFunc(out, func(x, y backend.Entry) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// notDir explains why List found nothing below dir: it is a file, or it
// does not exist.
func (b *Backend) notDir(ctx context.Context, dir string) error {
	_, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.key(dir)),
	})
	if err == nil {
		return &iofs.PathError{Op: "list", Path: dir, Err: errNotDir}
	}
	return translate("list", dir, err)
}

// errNotDir is returned when List names a file.
var errNotDir = errors.New("not a directory")

// Stat returns the entry at path: the object if one has that key
// (HeadObject), else a directory if any key lies below path + "/".
func (b *Backend) Stat(ctx context.Context, path string) (backend.Entry, error) {
	if err := checkPath("stat", path); err != nil {
		return backend.Entry{}, err
	}
	if path == "" {
		return dirEntry(""), nil
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	head, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.key(path)),
	})
	if err == nil {
		return fileEntry(name, aws.ToInt64(head.ContentLength), head.LastModified, head.ETag), nil
	}
	if !errors.Is(errorKind(err), iofs.ErrNotExist) {
		return backend.Entry{}, translate("stat", path, err)
	}
	out, err := b.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
		Bucket:  aws.String(b.bucket),
		Prefix:  aws.String(b.dirPrefix(path)),
		MaxKeys: aws.Int32(1),
	})
	if err != nil {
		return backend.Entry{}, translate("stat", path, err)
	}
	if len(out.Contents) == 0 && len(out.CommonPrefixes) == 0 {
		return backend.Entry{}, &iofs.PathError{Op: "stat", Path: path, Err: iofs.ErrNotExist}
	}
	return dirEntry(name), nil
}
