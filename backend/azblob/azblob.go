package azblob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stallfs/stallfs/backend"
)

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Walker  = (*Backend)(nil)
)

// Backend serves one container (below an optional prefix) read-only. It is
// safe for concurrent use.
type Backend struct {
	// immutable after New
	opts      Options // with defaults
	client    *container.Client
	transport *http.Transport
	name      string    // az://account/container[/prefix]
	prefix    string    // "" or "prefix/": prepended to every path
	started   time.Time // mtime of synthesised directories

	counters counters
}

// New connects to the container and checks, with one request, that it
// exists and that the credential may list it: a token credential must
// yield a token, then one page of at most one blob is listed (this works
// for keys, connection strings, Azure AD roles and SAS tokens with list
// permission alike, which a container GetProperties would not). A refused
// credential returns an error satisfying errors.Is(err, ErrAuth), a missing
// container ErrContainerNotFound; neither error, nor any log line, holds a
// secret.
func New(ctx context.Context, o Options) (*Backend, error) {
	o = o.withDefaults()
	kind := o.Credential.Kind()
	if kind == "invalid" {
		return nil, errors.New("azblob: set exactly one of Credential's fields")
	}
	if o.Container == "" {
		return nil, errors.New("azblob: no container")
	}
	if o.Account == "" && kind != "connection-string" {
		return nil, errors.New("azblob: no account")
	}
	b := &Backend{opts: o, started: time.Now()}
	if o.Prefix != "" {
		b.prefix = o.Prefix + "/"
	}
	b.transport = newTransport(o.Concurrency)
	client, err := b.newClient()
	if err != nil {
		b.transport.CloseIdleConnections()
		return nil, err
	}
	b.client = client
	b.name = b.sourceName()
	if err := b.check(ctx); err != nil {
		b.transport.CloseIdleConnections()
		return nil, err
	}
	o.Logger.Info("azure blob container ready", "source", b.name, "endpoint", redactURL(b.serviceURL()),
		"credential", o.Credential, "max_retries", o.MaxRetries, "try_timeout", o.TryTimeout)
	return b, nil
}

// newClient builds the container client for the credential's kind.
func (b *Backend) newClient() (*container.Client, error) {
	o := b.opts
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    int32(o.MaxRetries),
			TryTimeout:    o.TryTimeout,
			RetryDelay:    o.RetryDelay,
			MaxRetryDelay: o.MaxRetryDelay,
		},
		Transport:        &http.Client{Transport: b.transport},
		PerCallPolicies:  []policy.Policy{&callPolicy{c: &b.counters}},
		PerRetryPolicies: []policy.Policy{&tryPolicy{c: &b.counters}},
		Telemetry:        policy.TelemetryOptions{ApplicationID: "stallfs"},
		// Emulators and private endpoints are reached over http; a bearer
		// token is then sent in the clear, which the user asked for by
		// naming an http endpoint.
		InsecureAllowCredentialWithHTTP: strings.HasPrefix(o.Endpoint, "http://"),
	}}
	c := o.Credential
	var (
		client *container.Client
		err    error
	)
	switch {
	case c.ConnectionString != "":
		client, err = container.NewClientFromConnectionString(c.ConnectionString, o.Container, copts)
		if err != nil {
			// The SDK's message may quote the string; say only what failed.
			return nil, fmt.Errorf("azblob: %w: malformed connection string", ErrAuth)
		}
		if o.Endpoint != "" {
			// An explicit endpoint wins over the connection string's.
			return nil, errors.New("azblob: give an endpoint or a connection string, not both")
		}
	case c.AccountKey != "":
		cred, kerr := container.NewSharedKeyCredential(o.Account, c.AccountKey)
		if kerr != nil {
			return nil, fmt.Errorf("azblob: %w: the account key is not valid base64", ErrAuth)
		}
		client, err = container.NewClientWithSharedKeyCredential(b.containerURL(""), cred, copts)
	case c.SAS != "":
		client, err = container.NewClientWithNoCredential(b.containerURL(strings.TrimPrefix(c.SAS, "?")), copts)
	case c.Token != nil:
		client, err = container.NewClient(b.containerURL(""), c.Token, copts)
	default:
		client, err = container.NewClientWithNoCredential(b.containerURL(""), copts)
	}
	if err != nil {
		return nil, fmt.Errorf("azblob: %w", sanitize(err))
	}
	return client, nil
}

// serviceURL is the blob service endpoint without a trailing slash.
func (b *Backend) serviceURL() string {
	if b.opts.Endpoint != "" {
		return b.opts.Endpoint
	}
	if b.client != nil {
		// From a connection string: the container URL less the container.
		u := b.client.URL()
		if i := strings.IndexByte(u, '?'); i >= 0 {
			u = u[:i]
		}
		return strings.TrimSuffix(strings.TrimRight(u, "/"), "/"+url.PathEscape(b.opts.Container))
	}
	return "https://" + b.opts.Account + ".blob.core.windows.net"
}

// containerURL is the container's URL with an optional query (a SAS).
func (b *Backend) containerURL(query string) string {
	u := b.serviceURL() + "/" + url.PathEscape(b.opts.Container)
	if query != "" {
		u += "?" + query
	}
	return u
}

// sourceName is az://ACCOUNT/CONTAINER[/PREFIX], without secrets.
func (b *Backend) sourceName() string {
	account := b.opts.Account
	if account == "" {
		account = accountFromURL(b.serviceURL())
	}
	s := "az://" + account + "/" + b.opts.Container
	if b.opts.Prefix != "" {
		s += "/" + b.opts.Prefix
	}
	return s
}

// accountFromURL guesses the account of a service URL: the first label of
// ACCOUNT.blob.HOST, else the first path segment (emulator style).
func accountFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unknown"
	}
	if h := u.Hostname(); strings.Contains(h, ".blob.") {
		return h[:strings.IndexByte(h, '.')]
	}
	if seg := strings.Trim(u.Path, "/"); seg != "" {
		first, _, _ := strings.Cut(seg, "/")
		return first
	}
	return u.Hostname()
}

// check verifies the credential and the container (see New).
func (b *Backend) check(ctx context.Context) error {
	if b.opts.Credential.Token != nil {
		if err := checkToken(ctx, b.opts.Credential.Token); err != nil {
			return err
		}
	}
	prefix := b.prefix
	pager := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix: &prefix, MaxResults: to32(1),
	})
	if _, err := pager.NextPage(ctx); err != nil {
		return translate("check", b.opts.Container, err)
	}
	return nil
}

// newTransport is the HTTP transport: keep-alive connections for as many
// parallel reads as the fs layer issues (its semaphore bounds them), short
// dial and TLS timeouts so a dead endpoint fails the try fast and is
// retried by the SDK.
func newTransport(concurrency int) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     false, // Azure Storage speaks HTTP/1.1
		MaxIdleConns:          0,     // no global limit
		MaxIdleConnsPerHost:   max(64, 4*concurrency),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// String returns az://ACCOUNT/CONTAINER[/PREFIX].
func (b *Backend) String() string { return b.name }

// Close releases idle connections.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// Stats are the backend's counters since New.
type Stats struct {
	// Requests counts HTTP tries (retries included).
	Requests int64
	// Retries counts tries after the first of a request.
	Retries int64
	// Throttled counts 429 and 503 responses (each was retried while
	// retries remained).
	Throttled int64
	// BytesRead counts blob bytes returned by ReadAt.
	BytesRead int64
	// Skipped counts blob names that could not be served as paths, over
	// every List and Walk.
	Skipped int64
}

// Stats returns the counters.
func (b *Backend) Stats() Stats {
	c := &b.counters
	calls := c.calls.Load() // before requests: a call counts before its tries
	requests := c.requests.Load()
	return Stats{
		Requests: requests, Retries: max(requests-calls, 0), Throttled: c.throttled.Load(),
		BytesRead: c.bytesRead.Load(), Skipped: c.skipped.Load(),
	}
}

type counters struct {
	calls, requests, throttled, bytesRead, skipped atomic.Int64
}

// callPolicy counts operations (once per request, retries not included)
// and tryPolicy counts tries and throttling responses; their difference is
// the number of retries.
type callPolicy struct{ c *counters }

func (p *callPolicy) Do(req *policy.Request) (*http.Response, error) {
	p.c.calls.Add(1)
	return req.Next()
}

type tryPolicy struct{ c *counters }

func (p *tryPolicy) Do(req *policy.Request) (*http.Response, error) {
	p.c.requests.Add(1)
	resp, err := req.Next()
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		p.c.throttled.Add(1)
	}
	return resp, err
}

func to32(n int32) *int32 { return &n }

// pageSize is the MaxResults of listings (nil: the service's maximum).
func (b *Backend) pageSize() *int32 {
	if b.opts.ListPageSize <= 0 {
		return nil
	}
	return to32(int32(min(b.opts.ListPageSize, 5000)))
}
