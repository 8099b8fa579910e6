package s3

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// TestOddKeys stores keys that a file system cannot show (empty segments,
// "." and ".."), folder markers and a name that is both a file and a
// directory, and checks that List, Walk and Stat agree.
func TestOddKeys(t *testing.T) {
	st := newFakeStore(t, "")
	for _, k := range []string{
		"a", "a/shadowed", "a/deeper/x", // "a" is a file: its subtree is hidden
		"d/", "d/e/", "d/f", // folder markers
		"empty/",                                           // an empty directory, only a marker
		"bad//x", "./x", "../x", "y/./z", "y/../z", "y/ok", // invalid, except y/ok
		"t/" + strings.Repeat("n", 256), // a name too long
	} {
		st.PutKey(t, k, []byte("data of "+k))
	}
	b := st.open(t, Options{})
	ls := func(dir string) []string {
		t.Helper()
		es, err := b.List(t.Context(), dir)
		if err != nil {
			t.Fatalf("List(%q): %v", dir, err)
		}
		var out []string
		for _, e := range es {
			n := e.Name
			if e.IsDir() {
				n += "/"
			}
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"", []string{"a", "bad/", "d/", "empty/", "t/", "y/"}},
		{"bad", nil}, // only bad//x below it
		{"d", []string{"e/", "f"}},
		{"d/e", nil},
		{"empty", nil},
		{"y", []string{"ok"}},
		{"t", nil},
	} {
		if got := ls(tc.dir); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}

	var walked []string
	err := b.Walk(t.Context(), "", func(p string, e backend.Entry) error {
		if e.IsDir() {
			p += "/"
		}
		walked = append(walked, p)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	slices.Sort(walked)
	want := []string{"a", "bad/", "d/", "d/e/", "d/f", "empty/", "t/", "y/", "y/ok"}
	if !slices.Equal(walked, want) {
		t.Errorf("Walk = %q, want %q", walked, want)
	}
	// bad//x, ./x, ../x, y/./z, y/../z, the long name, and the two keys
	// below the file "a" (List skips the directory "a" as well).
	if got := b.SkippedKeys(); got < 8 {
		t.Errorf("SkippedKeys = %d, want at least 8", got)
	}

	if e, err := b.Stat(t.Context(), "a"); err != nil || e.IsDir() {
		t.Errorf("Stat(a) = %+v, %v; want the file", e, err)
	}
	for _, d := range []string{"d", "d/e", "empty"} {
		if e, err := b.Stat(t.Context(), d); err != nil || !e.IsDir() {
			t.Errorf("Stat(%q) = %+v, %v; want a directory", d, e, err)
		}
	}
	if _, err := b.List(t.Context(), "y/ok"); err == nil || errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("List of the file y/ok = %v; want a not-a-directory error", err)
	}
}

func TestWalkSubdirAndPrefix(t *testing.T) {
	st := newFakeStore(t, "/pre/fix/")
	st.PutKey(t, "pre/fix/x/y/z", []byte("1"))
	st.PutKey(t, "pre/fix/x/w", []byte("2"))
	st.PutKey(t, "pre/fixed/x", []byte("outside"))
	st.PutKey(t, "pre/other", []byte("outside"))
	b := st.open(t, Options{})
	if got, want := b.String(), "s3://fake/pre/fix"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	got := map[string]bool{}
	if err := b.Walk(t.Context(), "x", func(p string, e backend.Entry) error {
		got[fmt.Sprintf("%s dir=%v", p, e.IsDir())] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"x/y dir=true": true, "x/y/z dir=false": true, "x/w dir=false": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk(x) = %v, want %v", got, want)
	}
	err := b.Walk(t.Context(), "x/w", func(string, backend.Entry) error { return nil })
	if err == nil || errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Walk of the file x/w = %v, want a not-a-directory error", err)
	}
}

func TestNewErrorsFake(t *testing.T) {
	st := newFakeStore(t, "")
	st.bucket = "no-such-bucket"
	_, err := New(t.Context(), Options{Bucket: st.bucket, Endpoint: st.endpoint, PathStyle: true})
	if !errors.Is(err, ErrBucketNotFound) {
		t.Fatalf("New on a missing bucket = %v, want ErrBucketNotFound", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "s3://no-such-bucket") || !strings.Contains(msg, "NoSuchBucket") || strings.Contains(msg, "\n") {
		t.Errorf("message %q: want one line naming the source and NoSuchBucket", msg)
	}
	for _, opts := range []Options{{}, {Bucket: "a/b"}} {
		if _, err := New(t.Context(), opts); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", opts, err)
		}
	}
	t.Setenv("AWS_PROFILE", "")
	if _, err := New(t.Context(), Options{Bucket: "x", Profile: "no-such-profile", Endpoint: st.endpoint}); !errors.Is(err, ErrConfig) {
		t.Errorf("New with an unknown profile = %v, want ErrConfig", err)
	}
}

func TestNewErrorsVersitygw(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	opts := Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true}

	s3test.SetCredentialsEnv(t, srv.AccessKey, "wrong-secret-value")
	_, err := New(t.Context(), opts)
	if !errors.Is(err, ErrAccessDenied) || !errors.Is(err, iofs.ErrPermission) {
		t.Fatalf("New with a wrong secret = %v, want ErrAccessDenied and fs.ErrPermission", err)
	}
	if msg := err.Error(); strings.Contains(msg, "wrong-secret-value") || strings.Contains(msg, "\n") {
		t.Errorf("message %q leaks the secret or spans lines", msg)
	}

	s3test.SetCredentialsEnv(t, "unknown-access-key", srv.SecretKey)
	if _, err := New(t.Context(), opts); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("New with an unknown access key = %v, want ErrAccessDenied", err)
	}

	srv.SetEnv(t)
	opts.Bucket = "missing-bucket"
	if _, err := New(t.Context(), opts); !errors.Is(err, ErrBucketNotFound) {
		t.Errorf("New on a missing bucket = %v, want ErrBucketNotFound", err)
	}

	// Anonymous requests are refused by a private bucket.
	opts.Bucket, opts.NoSignRequest = bucket, true
	if _, err := New(t.Context(), opts); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("New unsigned on a private bucket = %v, want ErrAccessDenied", err)
	}
}

func TestErrorKind(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}
	}
	for _, tc := range []struct {
		err  error
		want error
	}{
		{api("NoSuchKey"), iofs.ErrNotExist},
		{api("NoSuchBucket"), ErrBucketNotFound},
		{api("AccessDenied"), ErrAccessDenied},
		{api("InvalidAccessKeyId"), ErrAccessDenied},
		{api("SignatureDoesNotMatch"), ErrAccessDenied},
		{api("PreconditionFailed"), backend.ErrStale},
		{api("SlowDown"), backend.ErrThrottled},
		{api("InvalidRange"), errInvalidRange},
		{status(404), iofs.ErrNotExist},
		{status(403), ErrAccessDenied},
		{status(412), backend.ErrStale},
		{status(416), errInvalidRange},
		{status(503), backend.ErrThrottled},
		{status(500), nil},
		{fmt.Errorf("wrapped: %w", api("NoSuchKey")), iofs.ErrNotExist},
	} {
		if got := errorKind(tc.err); got != tc.want {
			t.Errorf("errorKind(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if tc.want == nil || tc.want == errInvalidRange {
			continue
		}
		err := translate("read", "p", tc.err)
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("translate(%v) = %v, want it to wrap %v and the cause", tc.err, err, tc.want)
		}
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "a": "a/", "/a/b/": "a/b/", "a/b": "a/b/"} {
		if got := normPrefix(in); got != want {
			t.Errorf("normPrefix(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{`"abc"`: "abc", "abc": "abc", `W/"abc-2"`: "abc-2"} {
		if got := normETag(&in); got != want {
			t.Errorf("normETag(%q) = %q, want %q", in, got, want)
		}
	}
	if normETag(nil) != "" {
		t.Errorf("normETag(nil) not empty")
	}
	for in, want := range map[string]bool{"a": true, "a/b c/ü": true, "": false, "a//b": false, "a/": false,
		"/a": false, ".": false, "a/..": false, "a/./b": false, "a\x00b": false, strings.Repeat("x", 256): false, "..a": true} {
		if got := validPath(in); got != want {
			t.Errorf("validPath(%q) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[string][2]int64{"bytes 0-99/100": {0, 99}, "bytes 5-9/*": {5, 9}} {
		s, e, err := parseContentRange(in)
		if err != nil || s != want[0] || e != want[1] {
			t.Errorf("parseContentRange(%q) = %d, %d, %v; want %v", in, s, e, err, want)
		}
	}
	for _, in := range []string{"", "bytes */100", "items 0-1/2", "bytes a-b/3"} {
		if _, _, err := parseContentRange(in); err == nil {
			t.Errorf("parseContentRange(%q): no error", in)
		}
	}
}

// TestRegionRedirect: a bucket in another region than the default chain
// says answers 301 with x-amz-bucket-region; New follows it once, unless
// the region was given explicitly.
func TestRegionRedirect(t *testing.T) {
	s3test.SetCredentialsEnv(t, s3test.AccessKey, s3test.SecretKey) // AWS_REGION=us-east-1
	var scopes []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scopes = append(scopes, auth[strings.Index(auth, "Credential=")+11:strings.Index(auth, "/s3/aws4_request")])
		w.Header().Set("Content-Type", "application/xml")
		if strings.Contains(auth, "/eu-west-1/s3/") {
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`+
				`<Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
			return
		}
		w.Header().Set("X-Amz-Bucket-Region", "eu-west-1")
		w.WriteHeader(http.StatusMovedPermanently)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PermanentRedirect</Code>`+
			`<Message>The bucket you are attempting to access must be addressed using the specified endpoint.</Message></Error>`)
	}))
	defer srv.Close()

	b, err := New(t.Context(), Options{Bucket: "b", Endpoint: srv.URL, PathStyle: true})
	if err != nil {
		t.Fatalf("New without a region: %v", err)
	}
	b.Close()
	if len(scopes) != 2 || !strings.HasSuffix(scopes[0], "/us-east-1") || !strings.HasSuffix(scopes[1], "/eu-west-1") {
		t.Errorf("signing scopes = %q, want us-east-1 then eu-west-1", scopes)
	}

	_, err = New(t.Context(), Options{Bucket: "b", Endpoint: srv.URL, PathStyle: true, Region: "us-east-1"})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "eu-west-1") {
		t.Errorf("New with an explicit wrong region = %v; want ErrConfig naming eu-west-1", err)
	}
}
