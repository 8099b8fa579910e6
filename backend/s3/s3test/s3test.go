// Package s3test starts a real S3 server for tests: versitygw with its
// posix backend in a temporary directory, listening on a free 127.0.0.1
// port with fixed test credentials.
//
// The versitygw binary is looked for at $STALLFS_VERSITYGW, then at
// <repo>/.cache/bin/versitygw; when missing it is built there once with
// "go install" (a lock file keeps parallel test binaries from building it
// twice), which needs the module proxy or a warm module cache.
package s3test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stallfs/stallfs/backend/internal/servertest"
)

// Version is the versitygw release the helper installs.
const Version = "v1.8.0"

// The fixed credentials of every test server.
const (
	AccessKey = "stallfs-test-access"
	SecretKey = "stallfs-test-secret-key-0123456789"
	Region    = "us-east-1"
)

// Server is one running versitygw process.
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:PORT".
	Endpoint string
	// Addr is the host:port it listens on.
	Addr string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// Dir is the posix backend's root: one directory per bucket.
	Dir string

	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	client   *awss3.Client
	output   servertest.Buffer
}

var bucketSeq atomic.Int64

// Binary returns the path of the versitygw binary, building it on first
// use.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("STALLFS_VERSITYGW"); p != "" {
		return p
	}
	root, err := servertest.RepoRoot()
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	bin := filepath.Join(root, ".cache", "bin", "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatalf("s3test: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".cache", "versitygw.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("s3test: lock: %v", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin // another test binary built it while we waited
	}
	t.Logf("s3test: building versitygw %s into %s (once)", Version, filepath.Dir(bin))
	cmd := exec.Command("go", "install", "github.com/versity/versitygw/cmd/versitygw@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("s3test: go install versitygw: %v\n%s", err, out)
	}
	return bin
}

// Start starts a versitygw server for the test and stops it in
// t.Cleanup. It returns once the server accepts connections. A server that
// exits before listening (its port taken meanwhile) is started again on
// another port, up to three times.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir, meta := t.TempDir(), t.TempDir()
	var lastErr error
	for range 3 {
		port, err := servertest.FreePort()
		if err != nil {
			t.Fatalf("s3test: %v", err)
		}
		s := &Server{
			AccessKey: AccessKey,
			SecretKey: SecretKey,
			Dir:       dir,
			Addr:      net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			exited:    make(chan struct{}),
		}
		s.Endpoint = "http://" + s.Addr
		s.cmd = exec.Command(bin, "--port", s.Addr, "--region", Region, "--keep-alive", "--quiet",
			"posix", "--sidecar", meta, s.Dir)
		s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
		s.cmd.Stdout = &s.output
		s.cmd.Stderr = &s.output
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("s3test: start versitygw: %v", err)
		}
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
		t.Cleanup(s.Stop)
		err = servertest.WaitListening(port, s.exited, 20*time.Second)
		if err == nil {
			s.client = NewClient(s.Endpoint, s.AccessKey, s.SecretKey)
			return s
		}
		lastErr = fmt.Errorf("versitygw %w: %s", err, s.output.String())
		s.Stop()
	}
	t.Fatalf("s3test: %v", lastErr)
	return nil
}

// NewClient returns an S3 client for endpoint with static credentials and
// path-style addressing, independent of the AWS_* environment.
func NewClient(endpoint, accessKey, secretKey string) *awss3.Client {
	return awss3.New(awss3.Options{
		Region:                     Region,
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Client returns a client of the server with the root credentials.
func (s *Server) Client() *awss3.Client { return s.client }

// Stop kills the server and waits for it to exit. It may be called more
// than once, also from a test that wants the server gone mid-read.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Exited is closed once the server process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// SetEnv points the SDK's default credential chain at the server for the
// rest of the test (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)
// and hides any shared config or profile of the machine.
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	SetCredentialsEnv(t, s.AccessKey, s.SecretKey)
}

// SetCredentialsEnv sets the SDK's environment credentials for the rest
// of the test and hides the machine's shared config and profiles.
func SetCredentialsEnv(t testing.TB, accessKey, secretKey string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// NewBucket creates an empty bucket with a fresh name and returns it.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("stallfs-test-%d", bucketSeq.Add(1))
	if _, err := s.client.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	return name
}

// Put creates or replaces object key of bucket with data.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	if _, err := s.client.PutObject(t.Context(), &awss3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}); err != nil {
		t.Fatalf("s3test: put %s/%s: %v", bucket, key, err)
	}
}

// Delete removes object key of bucket.
func (s *Server) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	if _, err := s.client.DeleteObject(t.Context(), &awss3.DeleteObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
	}); err != nil {
		t.Fatalf("s3test: delete %s/%s: %v", bucket, key, err)
	}
}
