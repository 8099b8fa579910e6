package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/stallfs/stallfs/backend"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxRetries  = 4               // 5 attempts in all
	DefaultMaxBackoff  = 2 * time.Second // cap of one retry delay
	DefaultTimeout     = 30 * time.Second
	DefaultPartSize    = 8 << 20 // 8 MiB
	DefaultConcurrency = 8
	// DefaultListConcurrency is how many prefixes Walk lists at once.
	DefaultListConcurrency = 16
	defaultRegion          = "us-east-1"
)

// Options configures a Backend. Only Bucket is required; the zero value of
// every other field selects a default that works against AWS.
type Options struct {
	// Bucket is the bucket name.
	Bucket string
	// Prefix selects a subtree of the bucket ("train" or "train/"). Keys
	// outside it are invisible; paths are relative to it.
	Prefix string
	// Region is the bucket's region. Empty: the SDK's default chain
	// (AWS_REGION, the profile), else us-east-1.
	Region string
	// Endpoint is the base URL of an S3-compatible store
	// ("http://127.0.0.1:7070"). Empty: AWS.
	Endpoint string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// instead of the host name; most S3-compatible stores need it.
	PathStyle bool
	// Profile names a profile of the shared config and credentials files.
	// Empty: AWS_PROFILE or "default".
	Profile string
	// NoSignRequest sends requests unsigned, for public buckets.
	NoSignRequest bool
	// MaxRetries is how many times a failed request is retried after the
	// first attempt (0: DefaultMaxRetries; negative: never).
	MaxRetries int
	// MaxBackoff caps the delay before one retry (0: DefaultMaxBackoff).
	MaxBackoff time.Duration
	// Timeout bounds one attempt of one request: connecting, waiting for
	// the response headers and reading the body (0: DefaultTimeout).
	Timeout time.Duration
	// PartSize is the largest range one GET asks for; longer reads are
	// split into parts fetched in parallel (0: DefaultPartSize).
	PartSize int64
	// Concurrency bounds the parts of one ReadAt in flight at once
	// (0: DefaultConcurrency).
	Concurrency int
	// ListConcurrency bounds the listings one Walk runs at once: it lists
	// the top levels of the subtree with a delimiter, then the prefixes
	// found there in parallel, each paginated (0:
	// DefaultListConcurrency; 1 or less: one flat listing).
	ListConcurrency int
	// Logger receives the backend's logs (nil: discard).
	Logger *slog.Logger
}

// Backend is a read-only backend.Backend over one bucket (and prefix) of
// S3 or an S3-compatible store. It is safe for concurrent use.
type Backend struct {
	// immutable after New
	client      *awss3.Client
	httpClient  *awshttp.BuildableClient
	retryer     aws.RetryerV2
	bucket      string
	prefix      string // "" or ends in "/"
	partSize    int64
	concurrency int
	listConc    int   // 0 or 1: Walk lists flat
	listKeys    int32 // MaxKeys of Walk's listings; 0: the store's (1,000); tests set it
	maxAttempts int
	log         *slog.Logger
	name        string

	skipOnce sync.Once
	skipped  atomic.Int64
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Walker  = (*Backend)(nil)
)

// New connects to the bucket and checks that it exists and that the
// credentials may list it, with one ListObjectsV2 of at most one key. Its
// error wraps ErrConfig (bad options, unknown profile), ErrBucketNotFound
// or ErrAccessDenied (with a one-line message naming the S3 error code),
// or else the SDK's error (an unreachable endpoint, after retries).
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Bucket == "" {
		return nil, fmt.Errorf("%w: no bucket given", ErrConfig)
	}
	if strings.Contains(opts.Bucket, "/") {
		return nil, fmt.Errorf("%w: bucket name %q contains a slash", ErrConfig, opts.Bucket)
	}
	b := &Backend{
		bucket:      opts.Bucket,
		prefix:      normPrefix(opts.Prefix),
		partSize:    opts.PartSize,
		concurrency: opts.Concurrency,
		log:         opts.Logger,
	}
	if b.partSize <= 0 {
		b.partSize = DefaultPartSize
	}
	if b.concurrency <= 0 {
		b.concurrency = DefaultConcurrency
	}
	switch {
	case opts.ListConcurrency == 0:
		b.listConc = DefaultListConcurrency
	case opts.ListConcurrency > 1:
		b.listConc = opts.ListConcurrency
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.name = "s3://" + b.bucket
	if b.prefix != "" {
		b.name += "/" + strings.TrimSuffix(b.prefix, "/")
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	b.maxAttempts = retries + 1
	maxBackoff := opts.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	// The standard retryer already retries 500/502/503/504, connection
	// errors and the throttling codes (SlowDown among them, with a 1 s base
	// delay instead of 50 ms). Its client-side retry quota is switched
	// off: under a throttling storm the quota would fail reads at once,
	// while each request here is bounded by MaxAttempts anyway.
	b.retryer = retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = b.maxAttempts
		o.MaxBackoff = maxBackoff
		o.RateLimiter = ratelimit.None
	})

	// A BuildableClient, so that the SDK can still add AWS_CA_BUNDLE to
	// its transport (it refuses any other client type when the variable
	// is set).
	b.httpClient = awshttp.NewBuildableClient().
		WithTimeout(timeout).
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = min(timeout, 10*time.Second)
		}).
		WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = 256
			tr.MaxIdleConnsPerHost = 64
			tr.IdleConnTimeout = 90 * time.Second
			tr.ResponseHeaderTimeout = timeout
			tr.TLSHandshakeTimeout = 10 * time.Second
			tr.ExpectContinueTimeout = time.Second
			// Objects are read as stored; a transparent gzip would hide
			// the byte count the range asked for.
			tr.DisableCompression = true
		})

	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(b.httpClient),
		config.WithRetryer(func() aws.Retryer { return b.retryer }),
		config.WithLogger(slogLogger{b.log}),
		// S3-compatible stores differ in which checksums they compute and
		// return; ranged GETs carry no whole-object checksum at all.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.NoSignRequest {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: load AWS config: %w", ErrConfig, err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	newClient := func() *awss3.Client {
		return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
			if opts.Endpoint != "" {
				o.BaseEndpoint = aws.String(opts.Endpoint)
			}
			o.UsePathStyle = opts.PathStyle
			o.DisableLogOutputChecksumValidationSkipped = true
		})
	}
	b.client = newClient()

	err = b.check(ctx)
	if r := bucketRegion(err); r != "" && r != cfg.Region && opts.Region == "" {
		// The bucket lives elsewhere than the default chain said: follow
		// the region S3 names in its 301, once.
		b.log.Info("s3: bucket is in another region; using it", "source", b.name, "region", r, "was", cfg.Region)
		cfg.Region = r
		b.client = newClient()
		err = b.check(ctx)
	}
	if err != nil {
		b.httpClient.GetTransport().CloseIdleConnections()
		return nil, err
	}
	return b, nil
}

// bucketRegion returns the region that a redirect (301) or a refusal names
// in its x-amz-bucket-region header, or "".
func bucketRegion(err error) string {
	var re *awshttp.ResponseError
	if err == nil || !errors.As(err, &re) || re.Response == nil {
		return ""
	}
	return re.Response.Header.Get("X-Amz-Bucket-Region")
}

// check lists at most one key under the prefix: it proves that the bucket
// exists and that the credentials may list it, which every mount needs.
func (b *Backend) check(ctx context.Context) error {
	_, err := b.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
		Bucket:  aws.String(b.bucket),
		Prefix:  aws.String(b.prefix),
		MaxKeys: aws.Int32(1),
	})
	if err == nil {
		return nil
	}
	switch kind := errorKind(err); kind {
	case ErrBucketNotFound, ErrAccessDenied:
		return &checkError{kind: kind, source: b.name, cause: err}
	}
	if r := bucketRegion(err); r != "" {
		return fmt.Errorf("%w: %s is in region %s (--s3-region): %w", ErrConfig, b.name, r, err)
	}
	return fmt.Errorf("%s: %w", b.name, err)
}

// String returns "s3://BUCKET" or "s3://BUCKET/PREFIX".
func (b *Backend) String() string { return b.name }

// Close releases idle connections. The Backend must not be used after.
func (b *Backend) Close() error {
	b.httpClient.GetTransport().CloseIdleConnections()
	return nil
}

// SkippedKeys returns how many times so far a listing left out a key
// because it cannot be a path (an empty segment, "." or "..", a name too
// long for the kernel, a NUL byte) or lies below a name that is a file.
func (b *Backend) SkippedKeys() int64 { return b.skipped.Load() }

// key returns the object key of path p.
func (b *Backend) key(p string) string { return b.prefix + p }

// normPrefix turns "a/b", "/a/b/" and "a/b/" into "a/b/", and "" or "/"
// into "".
func normPrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

// normETag strips the quotes (and a weak marker) of an ETag, the form in
// which versions are handed out and compared everywhere in this package.
func normETag(s *string) string {
	if s == nil {
		return ""
	}
	return strings.Trim(strings.TrimPrefix(*s, "W/"), `"`)
}

// quoteETag returns the If-Match form of a normalised version.
func quoteETag(v string) *string { return aws.String(`"` + v + `"`) }

// slogLogger passes the SDK's own log lines (rare: configuration
// warnings) to slog at debug or warn level.
type slogLogger struct{ l *slog.Logger }

// Logf implements logging.Logger.
func (s slogLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	s.l.Log(context.Background(), level, "aws sdk: "+fmt.Sprintf(format, v...))
}

// drain discards what is left of a response body and closes it, so the
// connection can be reused.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 64<<10))
	_ = rc.Close()
}
