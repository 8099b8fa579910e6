package main

// End-to-end tests of s3:// sources: a real S3 server (versitygw, started
// by backend/s3/s3test on 127.0.0.1), the stallfs binary mounting a bucket
// with --s3-endpoint and --s3-path-style and credentials from the AWS
// environment variables.

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/backend/s3"
	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// s3Bucket starts a server, points the AWS environment at it, and fills a
// fresh bucket with the e2e dataset. It returns the relative file paths.
func s3Bucket(t *testing.T) (*s3test.Server, string, []string) {
	t.Helper()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	files := uploadDataset(t, func(p string, data []byte) { srv.Put(t, bucket, p, data) })
	return srv, bucket, files
}

func wantTree(files []string) []string {
	set := map[string]bool{}
	for _, f := range files {
		set[f] = true
		for d := filepath.Dir(f); d != "."; d = filepath.Dir(d) {
			set[d+"/"] = true
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestE2ES3MountReadReplaceKill(t *testing.T) {
	t0 := time.Now()
	srv, bucket, files := s3Bucket(t)
	const big, bigSize = "big/replaced.bin", 32 << 20
	const cold, coldSize = "cold/unread.bin", 3 << 20
	srv.Put(t, bucket, big, pattern(big, bigSize))
	srv.Put(t, bucket, cold, pattern(cold, coldSize))
	all := append(slices.Clone(files), big, cold)

	mnt := testMountpoint(t)
	startForeground(t, "s3://"+bucket, mnt, "--s3-endpoint", srv.Endpoint, "--s3-path-style")

	t.Logf("server, upload and mount: %v", time.Since(t0))
	t0 = time.Now()
	if got, want := fileTree(t, mnt, true), wantTree(all); !slices.Equal(got, want) {
		t.Fatalf("tree through the mount:\n got %q\nwant %q", got, want)
	}

	// 16 readers, each through every file of the dataset in its own order.
	readConcurrently(t, mnt, files, 3)
	t.Logf("tree and 16 readers: %v", time.Since(t0))
	t0 = time.Now()

	// Replace the big object after its first bytes were read: a later
	// chunk fails with EIO, and nothing read is of the new version.
	f, err := os.Open(filepath.Join(mnt, big))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := pattern(big, bigSize)
	buf := make([]byte, 64<<10)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, old[:len(buf)]) {
		t.Fatalf("first read of %s: %v (content ok: %v)", big, err, bytes.Equal(buf, old[:len(buf)]))
	}
	srv.Put(t, bucket, big, bytes.Repeat([]byte{0xEE}, bigSize))
	if _, err := f.ReadAt(buf, 24<<20); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of %s at 24 MiB after the object was replaced: %v, want EIO", big, err)
	}
	scan := make([]byte, 1<<20)
	for off := 0; off < bigSize; off += len(scan) {
		n, err := f.ReadAt(scan, int64(off))
		if n > 0 && !bytes.Equal(scan[:n], old[off:off+n]) {
			t.Fatalf("read of %s at %d returned bytes of the new version", big, off)
		}
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("read of %s at %d: %v, want data of the old version or EIO", big, off, err)
		}
	}

	t.Logf("replace: %v", time.Since(t0))

	// Kill the server: a file never read fails with EIO, after bounded
	// retries, instead of hanging.
	srv.Stop()
	start := time.Now()
	_, err = os.ReadFile(filepath.Join(mnt, cold))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read of %s with the server gone: %v, want EIO", cold, err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("read with the server gone took %v", took)
	} else {
		t.Logf("read with the server gone failed after %v", took)
	}
}

func TestE2ES3SlowDownThroughMount(t *testing.T) {
	srv, bucket, files := s3Bucket(t)
	target, _ := url.Parse(srv.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var gets, refused atomic.Int64
	const refusals = 3
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") && gets.Add(1) <= refusals {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(px.Close)

	mnt := testMountpoint(t)
	startForeground(t, "s3://"+bucket, mnt, "--s3-endpoint", px.URL, "--s3-path-style")
	checkFiles(t, mnt, files)
	if refused.Load() != refusals {
		t.Errorf("refused %d GETs, want %d", refused.Load(), refusals)
	}
	t.Logf("%d object GETs, %d answered SlowDown", gets.Load(), refused.Load())
}

func TestE2ES3MountRefused(t *testing.T) {
	srv, bucket, _ := s3Bucket(t)
	mnt := testMountpoint(t)
	base := []string{"mount", "--s3-endpoint", srv.Endpoint, "--s3-path-style"}
	for _, tc := range []struct {
		name, source, secret, want string
		extra                      []string
	}{
		{"wrong secret", "s3://" + bucket, "not-the-secret", "access denied", nil},
		{"unknown access key", "s3://" + bucket, "", "access denied", nil},
		{"missing bucket", "s3://no-such-bucket", srv.SecretKey, "bucket does not exist", nil},
		{"no bucket", "s3:///prefix", srv.SecretKey, "no bucket", nil},
		{"bad endpoint", "s3://" + bucket, srv.SecretKey, "--s3-endpoint", []string{"--s3-endpoint", "ftp://x"}},
		{"dotdot prefix", "s3://" + bucket + "/a/../b", srv.SecretKey, "segment", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			access := srv.AccessKey
			if tc.secret == "" {
				access, tc.secret = "no-such-access-key", srv.SecretKey
			}
			s3test.SetCredentialsEnv(t, access, tc.secret)
			args := append(slices.Clone(base), tc.extra...)
			code, stdout, stderr := stallfsCmd(t, append(args, tc.source, mnt)...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stdout %q, stderr %q", code, stdout, stderr)
			}
			msg := strings.TrimSpace(stderr)
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q: want one line containing %q", stderr, tc.want)
			}
			t.Logf("stderr: %s", msg)
			if strings.Contains(stderr, "not-the-secret") {
				t.Errorf("stderr %q shows the secret", stderr)
			}
			if isMounted(mnt) {
				t.Errorf("%s is mounted after a refused mount", mnt)
			}
		})
	}
}

func TestS3Options(t *testing.T) {
	parse := func(t *testing.T, src string, args ...string) (s3.Options, error) {
		t.Helper()
		fs := flag.NewFlagSet("mount", flag.ContinueOnError)
		for _, f := range s3Flags() {
			if err := f.Apply(fs); err != nil {
				t.Fatal(err)
			}
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := s3Options(cli.NewContext(cli.NewApp(), fs, nil), u)
		return opts, err
	}
	t.Setenv("STALLFS_S3_REGION", "")
	o, err := parse(t, "s3://bkt/train/set/", "--s3-endpoint", "https://minio:9000", "--s3-path-style",
		"--s3-region", "eu-west-1", "--s3-profile", "p", "--s3-no-sign-request")
	if err != nil {
		t.Fatal(err)
	}
	if o.Bucket != "bkt" || o.Prefix != "train/set" || o.Endpoint != "https://minio:9000" || !o.PathStyle ||
		o.Region != "eu-west-1" || o.Profile != "p" || !o.NoSignRequest {
		t.Errorf("options = %+v", o)
	}
	for _, tc := range []struct{ src, endpoint string }{
		{"s3://key:secret@bkt/x", ""},
		{"s3:///x", ""},
		{"s3://bkt:9000/x", ""},
		{"s3://bkt/x?versionId=1", ""},
		{"s3://bkt/a//b", ""},
		{"s3://bkt/a/./b", ""},
		{"s3://bkt", "minio:9000"},
		{"s3://bkt", "ftp://minio"},
	} {
		args := []string{}
		if tc.endpoint != "" {
			args = append(args, "--s3-endpoint", tc.endpoint)
		}
		_, err := parse(t, tc.src, args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s %v: %v, want a usage error", tc.src, args, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: message %q shows the secret", tc.src, err)
		}
	}
}
