package s3

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/backendtest"
	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// store is an S3 endpoint with one bucket that tests write through a
// client of their own.
type store struct {
	endpoint string
	client   *awss3.Client
	bucket   string
	prefix   string // the Backend's Options.Prefix; Put paths are below it
	opts     Options
}

var _ backendtest.Fixture = (*store)(nil)

// Put implements backendtest.Fixture.
func (s *store) Put(t testing.TB, path string, data []byte) {
	t.Helper()
	s.PutKey(t, normPrefix(s.prefix)+path, data)
}

// PutKey stores data under a raw key, prefix or not.
func (s *store) PutKey(t testing.TB, key string, data []byte) {
	t.Helper()
	if _, err := s.client.PutObject(t.Context(), &awss3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// Backend implements backendtest.Fixture.
func (s *store) Backend(t testing.TB) backend.Backend {
	t.Helper()
	return s.open(t, s.opts)
}

// open returns a Backend over the store with opts (endpoint, bucket and
// prefix filled in) and closes it when the test ends.
func (s *store) open(t testing.TB, opts Options) *Backend {
	t.Helper()
	opts.Bucket, opts.Prefix = s.bucket, s.prefix
	if opts.Endpoint == "" {
		opts.Endpoint = s.endpoint
	}
	opts.PathStyle = true
	b, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newFakeStore starts gofakes3 in process with a fresh bucket. Its
// credentials are not checked; the SDK still signs with the test ones.
func newFakeStore(t *testing.T, prefix string) *store {
	t.Helper()
	s3test.SetCredentialsEnv(t, s3test.AccessKey, s3test.SecretKey)
	mem := s3mem.New()
	const bucket = "fake"
	if err := mem.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	return &store{
		endpoint: srv.URL,
		client:   s3test.NewClient(srv.URL, s3test.AccessKey, s3test.SecretKey),
		bucket:   bucket,
		prefix:   prefix,
	}
}

// newVersityStore returns a fresh bucket of srv.
func newVersityStore(t *testing.T, srv *s3test.Server, prefix string) *store {
	t.Helper()
	return &store{
		endpoint: srv.Endpoint,
		client:   srv.Client(),
		bucket:   srv.NewBucket(t),
		prefix:   prefix,
	}
}

func TestConformanceVersitygw(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture { return newVersityStore(t, srv, "") })
}

func TestConformanceVersitygwPrefix(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		s := newVersityStore(t, srv, "data/train")
		// Keys beside the prefix must stay invisible.
		s.PutKey(t, "data/train-other/x", []byte("outside"))
		s.PutKey(t, "data/trainx", []byte("outside"))
		return s
	})
}

func TestConformanceGofakes3(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		s := newFakeStore(t, "")
		s.opts.PartSize = 1 << 20 // more parallel parts on the 5 MiB object
		return s
	})
}
