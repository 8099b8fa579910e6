package s3

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/stallfs/stallfs/backend"
)

// ErrBucketNotFound reports that the bucket named by the source does not
// exist (S3 NoSuchBucket). New returns it wrapped around the SDK's error;
// the CLI maps it to exit status 2.
var ErrBucketNotFound = errors.New("s3: bucket not found")

// ErrAccessDenied reports that the store refused the credentials or the
// request (AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch, HTTP
// 403). Errors wrapping it also satisfy errors.Is(err, fs.ErrPermission).
// The message never carries a secret: the SDK's error names the code and
// the request id only.
var ErrAccessDenied = errors.New("s3: access denied")

// ErrConfig reports options or an AWS configuration that cannot work (no
// bucket, an unknown profile, a malformed shared config file).
var ErrConfig = errors.New("s3: bad configuration")

// checkError is what New returns when the store refuses the first
// listing: a one-line message naming the bucket and the S3 error code,
// wrapping both the kind (ErrBucketNotFound, ErrAccessDenied) and the
// SDK's error.
type checkError struct {
	kind   error
	source string
	cause  error
}

func (e *checkError) Error() string {
	detail := ""
	var apiErr smithy.APIError
	if errors.As(e.cause, &apiErr) {
		detail = " (" + apiErr.ErrorCode()
		if m := apiErr.ErrorMessage(); m != "" {
			detail += ": " + m
		}
		detail += ")"
	}
	switch e.kind {
	case ErrBucketNotFound:
		return e.source + ": bucket does not exist" + detail
	case ErrAccessDenied:
		return e.source + ": access denied, check the credentials" + detail
	}
	return e.source + ": " + e.cause.Error()
}

func (e *checkError) Unwrap() []error {
	if e.kind == ErrAccessDenied {
		return []error{e.kind, iofs.ErrPermission, e.cause}
	}
	return []error{e.kind, e.cause}
}

// errInvalidRange marks an HTTP 416: the range starts at or after the end
// of the object. It never leaves the package: ReadAt turns it into io.EOF
// or ErrStale.
var errInvalidRange = errors.New("s3: range not satisfiable")

// errorKind classifies an SDK error by its S3 error code, falling back to
// the HTTP status when the response had no body (HEAD requests).
func errorKind(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return iofs.ErrNotExist
		case "NoSuchBucket":
			return ErrBucketNotFound
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
			"Forbidden", "InvalidSecurity", "ExpiredToken", "InvalidToken",
			"AllAccessDisabled", "AccountProblem", "InvalidClientTokenId",
			"XAdminUserNotFound": // versitygw's answer (a 404) to an unknown access key
			return ErrAccessDenied
		case "PreconditionFailed":
			return backend.ErrStale
		case "InvalidRange":
			return errInvalidRange
		case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
			"TooManyRequests", "ServiceUnavailable":
			return backend.ErrThrottled
		}
	}
	var statusErr interface{ HTTPStatusCode() int }
	if errors.As(err, &statusErr) {
		switch statusErr.HTTPStatusCode() {
		case http.StatusNotFound:
			return iofs.ErrNotExist
		case http.StatusForbidden, http.StatusUnauthorized:
			return ErrAccessDenied
		case http.StatusPreconditionFailed:
			return backend.ErrStale
		case http.StatusRequestedRangeNotSatisfiable:
			return errInvalidRange
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			return backend.ErrThrottled
		}
	}
	return nil
}

// translate turns an SDK error of operation op on path into an error of
// the io/fs family: a *fs.PathError whose chain holds the matching
// sentinel (fs.ErrNotExist, backend.ErrStale, backend.ErrThrottled,
// ErrAccessDenied together with fs.ErrPermission, ErrBucketNotFound) and
// the SDK's error. Context errors keep their identity (the SDK wraps
// them).
func translate(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return err
	}
	kind := errorKind(err)
	switch {
	case kind == ErrAccessDenied:
		err = fmt.Errorf("%w (%w): %w", ErrAccessDenied, iofs.ErrPermission, err)
	case kind != nil && !errors.Is(err, kind):
		err = fmt.Errorf("%w: %w", kind, err)
	case kind == nil:
		err = opaque(err)
	}
	return &iofs.PathError{Op: op, Path: path, Err: err}
}

// opaqueError is a transport failure that outlived the retries (a refused
// or reset connection, a timeout). It keeps the message but hides the
// chain below it (net.OpError, syscall.Errno such as ECONNREFUSED), so
// that nothing above the backend mistakes it for a file system errno; it
// still matches a context error that caused it.
type opaqueError struct {
	msg string
	ctx error
}

func (e *opaqueError) Error() string { return e.msg }
func (e *opaqueError) Unwrap() error { return e.ctx }

func opaque(err error) error {
	o := &opaqueError{msg: err.Error()}
	switch {
	case errors.Is(err, context.Canceled):
		o.ctx = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		o.ctx = context.DeadlineExceeded
	}
	return o
}
