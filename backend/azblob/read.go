package azblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
)

// ReadAt reads len(p) bytes of blob path at off, pinned to version (an
// ETag from List, Walk or Stat) with If-Match on every request. A read
// longer than BlockSize is split into chunks fetched in parallel, at most
// Concurrency at once. If the blob was replaced, before or during the read,
// it returns an error satisfying errors.Is(err, backend.ErrStale).
//
// An empty version reads whatever the blob holds now, in one request (the
// SDK's retry reader pins a resumed body to the first response's ETag).
func (b *Backend) ReadAt(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	if err := checkPath("read", path); err != nil {
		return 0, err
	}
	if path == "" {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: iofs.ErrInvalid}
	}
	if off < 0 {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: negative offset %d", iofs.ErrInvalid, off)}
	}
	if len(p) == 0 {
		return 0, nil
	}
	version = strings.Trim(version, `"`) // a quoted ETag is the same version
	bs := int(b.opts.BlockSize)
	if len(p) <= bs || version == "" {
		n, err := b.fetch(ctx, path, version, p, off)
		b.counters.bytesRead.Add(int64(n))
		return n, err
	}

	chunks := (len(p) + bs - 1) / bs
	got := make([]int, chunks)
	errs := make([]error, chunks)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.opts.Concurrency)
	for i := range chunks {
		lo, hi := i*bs, min((i+1)*bs, len(p))
		g.Go(func() error {
			got[i], errs[i] = b.fetch(gctx, path, version, p[lo:hi], off+int64(lo))
			if errs[i] != nil && errs[i] != io.EOF {
				return errs[i] // cancels the other chunks
			}
			return nil
		})
	}
	_ = g.Wait()

	var n int
	for i := range chunks {
		b.counters.bytesRead.Add(int64(got[i]))
	}
	if err := firstError(ctx, errs); err != nil {
		return 0, err
	}
	for i := range chunks {
		n += got[i]
		if errs[i] == io.EOF {
			return n, io.EOF
		}
	}
	return n, nil
}

// firstError picks the error a split read returns: the caller's own
// cancellation first, then a stale version (a changed blob explains every
// other failure), then the first failure; io.EOF is not an error here.
func firstError(ctx context.Context, errs []error) error {
	if err := ctx.Err(); err != nil {
		return &Error{Op: "read", Err: contextCause(err)}
	}
	var first error
	for _, err := range errs {
		switch {
		case err == nil || err == io.EOF:
		case errors.Is(err, backend.ErrStale):
			return err
		case first == nil || errors.Is(first, context.Canceled):
			// A chunk cancelled because a sibling failed says less than
			// the sibling's error.
			first = err
		}
	}
	return first
}

// fetch reads dst from blob path at off with one ranged GET (resumed by the
// SDK's retry reader if the body breaks). It returns io.EOF, with the bytes
// that exist, when the blob ends before dst is full.
func (b *Backend) fetch(ctx context.Context, path, version string, dst []byte, off int64) (int, error) {
	opts := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off, Count: int64(len(dst))}}
	if version != "" {
		opts.AccessConditions = &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: quoteETag(version)},
		}
	}
	resp, err := b.client.NewBlobClient(b.blobName(path)).DownloadStream(ctx, opts)
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			// At or past the end. The 416 may win over the If-Match
			// check, so compare the ETag it carries, if any.
			if version != "" && responseETag(err) != "" && responseETag(err) != version {
				return 0, &Error{Op: "read", Path: path, Status: http.StatusPreconditionFailed, Err: backend.ErrStale}
			}
			return 0, io.EOF
		}
		err = b.readError(path, err)
		if errors.Is(err, backend.ErrStale) {
			// A missing blob fails If-Match too (Azurite answers 412,
			// not 404); tell the two apart.
			if _, serr := b.statBlob(ctx, path); errors.Is(serr, iofs.ErrNotExist) {
				return 0, &iofs.PathError{Op: "read", Path: path, Err: iofs.ErrNotExist}
			}
		}
		return 0, err
	}
	body := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: int32(max(b.opts.MaxRetries, 0))})
	defer body.Close()
	if version != "" && resp.ETag != nil && normETag(resp.ETag) != version {
		// If-Match passed yet another version came back: never serve it.
		return 0, &Error{Op: "read", Path: path, Err: backend.ErrStale}
	}
	want := len(dst)
	if resp.ContentLength != nil && *resp.ContentLength < int64(want) {
		want = int(max(*resp.ContentLength, 0))
	}
	n, err := io.ReadFull(body, dst[:want])
	if err != nil {
		return n, b.readError(path, err)
	}
	if want < len(dst) {
		return n, io.EOF
	}
	return n, nil
}

// readError translates a read failure; a missing blob is an
// *iofs.PathError around ErrNotExist.
func (b *Backend) readError(path string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Op: "read", Path: path, Err: fmt.Errorf("body ended early: %w", io.ErrUnexpectedEOF)}
	}
	err = translate("read", path, err)
	if errors.Is(err, iofs.ErrNotExist) {
		return &iofs.PathError{Op: "read", Path: path, Err: iofs.ErrNotExist}
	}
	return err
}

// responseETag is the normalised ETag header of an error response.
func responseETag(err error) string {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return ""
	}
	e := azcore.ETag(re.RawResponse.Header.Get("ETag"))
	return normETag(&e)
}
