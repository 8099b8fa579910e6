package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/s3"
)

// s3Flags are the flags of s3:// sources. Credentials come from the AWS
// SDK's default chain (environment, shared config and profiles, SSO, web
// identity, container and instance roles), never from flags.
func s3Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "s3-endpoint", Usage: "base `URL` of an S3-compatible store (MinIO, Ceph RGW, versitygw, R2; default: AWS)", EnvVars: []string{"STALLFS_S3_ENDPOINT"}},
		&cli.BoolFlag{Name: "s3-path-style", Usage: "address the bucket as ENDPOINT/BUCKET (most S3-compatible stores need it)", EnvVars: []string{"STALLFS_S3_PATH_STYLE"}},
		&cli.StringFlag{Name: "s3-region", Usage: "the bucket's `REGION` (default: AWS_REGION or the profile's, else us-east-1)", EnvVars: []string{"STALLFS_S3_REGION"}},
		&cli.StringFlag{Name: "s3-profile", Usage: "`PROFILE` of the shared AWS config and credentials files (default: AWS_PROFILE)", EnvVars: []string{"STALLFS_S3_PROFILE"}},
		&cli.BoolFlag{Name: "s3-no-sign-request", Usage: "send requests unsigned (public buckets)", EnvVars: []string{"STALLFS_S3_NO_SIGN_REQUEST"}},
		&cli.IntFlag{Name: "s3-list-concurrency", Usage: "prefixes listed at once when the mount lists the bucket (`N`, 0-256; 0: 16, 1: one flat listing)", EnvVars: []string{"STALLFS_S3_LIST_CONCURRENCY"}},
	}
}

// openS3 opens s3://BUCKET[/PREFIX]. A malformed source or endpoint, an
// unknown profile, a missing bucket and refused credentials are usage
// errors (exit 2), reported before anything mounts.
func openS3(ctx context.Context, c *cli.Context, u *url.URL, log *slog.Logger) (backend.Backend, error) {
	opts, err := s3Options(c, u)
	if err != nil {
		return nil, err
	}
	opts.Logger = log
	b, err := s3.New(ctx, opts)
	switch {
	case errors.Is(err, s3.ErrBucketNotFound), errors.Is(err, s3.ErrAccessDenied):
		return nil, usagef("%w", err) // names the source already
	case errors.Is(err, s3.ErrConfig):
		return nil, usagef("source %s: %w", u.Redacted(), err)
	case err != nil:
		return nil, fmt.Errorf("source %s: %w", u.Redacted(), err)
	}
	return b, nil
}

// s3Options validates the source URL and the s3 flags.
func s3Options(c *cli.Context, u *url.URL) (s3.Options, error) {
	src := "s3://" + u.Host + u.EscapedPath()
	switch {
	case u.User != nil:
		return s3.Options{}, usagef("source s3://%s: credentials do not belong in the URL; use the AWS environment or --s3-profile", u.Host)
	case u.Host == "":
		return s3.Options{}, usagef("source %q: no bucket (want s3://BUCKET[/PREFIX])", src)
	case u.Port() != "":
		return s3.Options{}, usagef("source %q: a bucket name has no port; give the store with --s3-endpoint", src)
	case u.RawQuery != "" || u.Fragment != "":
		return s3.Options{}, usagef("source %q: unexpected query or fragment", u.Redacted())
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		for seg := range strings.SplitSeq(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return s3.Options{}, usagef("source %q: prefix %q has an empty, '.' or '..' segment", src, prefix)
			}
		}
	}
	opts := s3.Options{
		Bucket:          u.Host,
		Prefix:          prefix,
		Region:          c.String("s3-region"),
		Endpoint:        c.String("s3-endpoint"),
		PathStyle:       c.Bool("s3-path-style"),
		Profile:         c.String("s3-profile"),
		NoSignRequest:   c.Bool("s3-no-sign-request"),
		ListConcurrency: c.Int("s3-list-concurrency"),
	}
	if opts.ListConcurrency < 0 || opts.ListConcurrency > 256 {
		return s3.Options{}, usagef("--s3-list-concurrency %d: want 0 to 256", opts.ListConcurrency)
	}
	if opts.Endpoint != "" {
		e, err := url.Parse(opts.Endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return s3.Options{}, usagef("--s3-endpoint %q: want http://HOST[:PORT] or https://HOST[:PORT]", redactEndpoint(opts.Endpoint))
		}
	}
	return opts, nil
}

// redactEndpoint hides a password someone put into the endpoint URL.
func redactEndpoint(s string) string {
	if e, err := url.Parse(s); err == nil {
		return e.Redacted()
	}
	return s
}
