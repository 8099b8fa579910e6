package azblob

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/stallfs/stallfs/backend"
)

// ErrContainerNotFound reports that the container does not exist (or, for
// some credentials, is not visible to them).
var ErrContainerNotFound = errors.New("container not found")

// ErrAuth reports that the service refused the credential: a wrong key, an
// expired or insufficient SAS, an Azure AD identity that cannot get a
// token or has no role on the container.
var ErrAuth = errors.New("authentication or authorization failed")

// Error is an error of the storage service or of the way to it, rebuilt
// without the request URL (which may carry a SAS token) or any header.
type Error struct {
	// Op is what was attempted ("list", "stat", "read", "check").
	Op string
	// Path is the blob name or prefix (no query string).
	Path string
	// Status is the HTTP status, 0 when no response came back.
	Status int
	// Code is the service's error code (x-ms-error-code), if any.
	Code string
	// Err is the cause: a sentinel of this package, of backend, of io/fs,
	// a context error, or a sanitised transport error.
	Err error
}

// Error formats the operation, path, status, code and cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("azure blob ")
	b.WriteString(e.Op)
	if e.Path != "" {
		fmt.Fprintf(&b, " %q", e.Path)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// transportError is a failure on the way to the service (refused, reset,
// DNS, TLS), rebuilt without the URL of a *url.Error, which may carry a SAS
// token. It is a net.Error but deliberately hides the syscall errno: a
// store that cannot be reached is an I/O error of the file system (EIO),
// not the ECONNREFUSED of a socket the reader never opened.
type transportError struct {
	msg     string
	timeout bool
}

func (e *transportError) Error() string   { return e.msg }
func (e *transportError) Timeout() bool   { return e.timeout }
func (e *transportError) Temporary() bool { return false }

// translate turns an SDK error into an *Error whose cause callers can
// match: iofs.ErrNotExist, backend.ErrStale, backend.ErrThrottled, ErrAuth,
// ErrContainerNotFound, context errors. It never keeps the SDK's message.
func translate(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return err
	}
	e := &Error{Op: op, Path: path}
	var re *azcore.ResponseError
	var afe *azidentity.AuthenticationFailedError
	switch {
	case errors.As(err, &re):
		e.Status, e.Code = re.StatusCode, re.ErrorCode
		e.Err = statusCause(re.StatusCode, bloberror.Code(re.ErrorCode))
	case errors.As(err, &afe):
		// azidentity's message names the tenant and client, not secrets,
		// but may quote the identity provider's response; keep it short.
		e.Err = fmt.Errorf("%w: Azure AD token request failed (HTTP %d)", ErrAuth, statusOf(afe.RawResponse))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.Err = contextCause(err)
	case isCredentialUnavailable(err):
		e.Err = fmt.Errorf("%w: no Azure AD credential available: %s", ErrAuth, firstLine(err.Error()))
	default:
		e.Err = sanitize(err)
	}
	return e
}

// statusCause maps a status and service error code to a sentinel.
func statusCause(status int, code bloberror.Code) error {
	switch {
	case code == bloberror.ContainerNotFound || code == bloberror.ContainerBeingDeleted:
		return ErrContainerNotFound
	case code == bloberror.ConditionNotMet || status == http.StatusPreconditionFailed:
		return backend.ErrStale
	case status == http.StatusNotFound:
		return iofs.ErrNotExist
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable ||
		code == bloberror.ServerBusy:
		return backend.ErrThrottled
	default:
		return errors.New(http.StatusText(status))
	}
}

// contextCause returns the bare context error inside err.
func contextCause(err error) error {
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// isCredentialUnavailable reports azidentity's "credential unavailable"
// error: a managed identity endpoint that is missing, no Azure CLI login,
// no workload identity token file. Its type is unexported, so it is
// recognised by its type name, here where SDK errors enter and nowhere else.
func isCredentialUnavailable(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.HasSuffix(fmt.Sprintf("%T", err), "azidentity.credentialUnavailableError") {
			return true
		}
	}
	return false
}

// sanitize rebuilds a transport error's message without a URL.
func sanitize(err error) error {
	var ne net.Error
	timeout := errors.As(err, &ne) && ne.Timeout()
	var ue *url.Error
	if errors.As(err, &ue) {
		return &transportError{msg: ue.Op + " " + redactURL(ue.URL) + ": " + sanitizeText(ue.Err), timeout: timeout}
	}
	return &transportError{msg: sanitizeText(err), timeout: timeout}
}

// sanitizeText is err's message with everything after a "?" of a URL cut,
// for errors that quote a URL without being a *url.Error.
func sanitizeText(err error) string {
	var errno syscall.Errno
	var ne *net.OpError
	switch {
	case errors.As(err, &errno):
		if errors.As(err, &ne) {
			return ne.Op + ": " + errno.Error()
		}
		return errno.Error()
	case errors.As(err, &ne):
		return ne.Op + ": " + firstLine(ne.Err.Error())
	}
	return redactQueries(firstLine(err.Error()))
}

// redactURL drops a URL's query and user info.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(url)"
	}
	u.RawQuery, u.User, u.Fragment = "", nil, ""
	return u.String()
}

// redactQueries cuts every "?..." up to the next space.
func redactQueries(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '?')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		if j := strings.IndexAny(s, " \t\"'"); j >= 0 {
			s = s[j:]
		} else {
			s = ""
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func statusOf(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}
