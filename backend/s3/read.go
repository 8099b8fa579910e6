package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
)

// ReadAt reads len(p) bytes of the object at path starting at off, pinned
// to version (the ETag) with If-Match on every ranged GET, so that a
// replaced object fails with backend.ErrStale instead of mixing two
// versions. A read longer than PartSize is split into PartSize ranges
// fetched in parallel, at most Concurrency at once. A body cut short is
// asked for again from where it stopped, at most MaxRetries times; the
// data returned is never short without an error. An empty version reads
// whatever the object holds now.
func (b *Backend) ReadAt(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: fmt.Errorf("negative offset %d: %w", off, iofs.ErrInvalid)}
	}
	if err := checkPath("read", path); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) <= b.partSize {
		return b.readRange(ctx, path, version, p, off)
	}

	nparts := (int64(len(p)) + b.partSize - 1) / b.partSize
	got := make([]int, nparts)
	eof := make([]bool, nparts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.concurrency)
	for i := range nparts {
		lo := i * b.partSize
		hi := min(lo+b.partSize, int64(len(p)))
		g.Go(func() error {
			n, err := b.readRange(gctx, path, version, p[lo:hi], off+lo)
			got[i] = n
			if err == io.EOF {
				eof[i] = true
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	// Every part has the same version, so the object ends inside the
	// first short part and the parts after it are empty.
	n := 0
	for i := range nparts {
		n += got[i]
		if eof[i] {
			return n, io.EOF
		}
	}
	return n, nil
}

// bodyError marks a failure while reading a response body: the SDK's
// retryer never sees it, so readRange retries it itself.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading response body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// readRange reads p at off with one GET, asking again for the rest when
// the body breaks off. Errors of the GET itself are final: the SDK has
// already retried them.
func (b *Backend) readRange(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	done := 0
	for attempt := 1; ; attempt++ {
		n, err := b.getOnce(ctx, path, version, p[done:], off+int64(done))
		done += n
		var be *bodyError
		if err == nil || err == io.EOF || !errors.As(err, &be) {
			if errors.Is(err, backend.ErrStale) {
				return 0, err
			}
			return done, err
		}
		if ctx.Err() != nil || attempt >= b.maxAttempts {
			return done, &iofs.PathError{Op: "read", Path: path,
				Err: fmt.Errorf("at %d after %d attempts: %w", off+int64(done), attempt, opaque(err))}
		}
		delay, derr := b.retryer.RetryDelay(attempt, be.err)
		if derr != nil {
			delay = 100 * time.Millisecond
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return done, &iofs.PathError{Op: "read", Path: path, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// getOnce issues one ranged GET for p at off and reads its body fully.
func (b *Backend) getOnce(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	in := &awss3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.key(path)),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
	}
	if version != "" {
		in.IfMatch = quoteETag(version)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		if errorKind(err) == errInvalidRange {
			return 0, b.eofOrStale(ctx, path, version)
		}
		return 0, translate("read", path, err)
	}
	body := out.Body
	defer drain(body)
	// A store that ignores If-Match still names the version it served.
	if version != "" && out.ETag != nil && normETag(out.ETag) != version {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: backend.ErrStale}
	}

	var want int64
	if cr := aws.ToString(out.ContentRange); cr != "" {
		start, end, err := parseContentRange(cr)
		if err != nil || start != off || end < start || end-start+1 > int64(len(p)) {
			return 0, &iofs.PathError{Op: "read", Path: path,
				Err: fmt.Errorf("asked for %d bytes at %d, got Content-Range %q", len(p), off, cr)}
		}
		want = end - start + 1
	} else {
		// A 200 without Content-Range: the store sent the whole object.
		size := aws.ToInt64(out.ContentLength)
		if off >= size {
			return 0, io.EOF
		}
		if _, err := io.CopyN(io.Discard, body, off); err != nil {
			return 0, &bodyError{err: err}
		}
		want = min(int64(len(p)), size-off)
	}
	n, err := io.ReadFull(body, p[:want])
	if err != nil {
		if ctx.Err() != nil {
			return n, &iofs.PathError{Op: "read", Path: path, Err: ctx.Err()}
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, &bodyError{err: err}
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// eofOrStale tells a range past the end of the object version (io.EOF)
// from one past the end of a shorter replacement (ErrStale): S3 may check
// the range before If-Match.
func (b *Backend) eofOrStale(ctx context.Context, path, version string) error {
	if version == "" {
		return io.EOF
	}
	_, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket:  aws.String(b.bucket),
		Key:     aws.String(b.key(path)),
		IfMatch: quoteETag(version),
	})
	if err != nil {
		return translate("read", path, err)
	}
	return io.EOF
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*").
func parseContentRange(s string) (start, end int64, err error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	rng, _, _ := strings.Cut(rest, "/")
	a, z, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bad Content-Range %q: %w", s, err)
	}
	if end, err = strconv.ParseInt(z, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bad Content-Range %q: %w", s, err)
	}
	return start, end, nil
}
