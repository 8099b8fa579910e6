package main

// Tests of Azure Blob sources: the blobfuse2 config mapping, source URLs
// and credentials (in process), and end-to-end mounts of the stallfs binary
// against a real Azurite (backend/azblob/azuritetest) on 127.0.0.1.

import (
	"bytes"
	"errors"
	"fmt"
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

	"github.com/stallfs/stallfs/backend/azblob"
	"github.com/stallfs/stallfs/backend/azblob/azuritetest"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBlobfuse2ConfigMapping(t *testing.T) {
	path := writeFile(t, "config.yaml", `
allow-other: true
read-only: true
logging:
  type: syslog
  level: log_warning
components:
  - libfuse
  - file_cache
  - attr_cache
  - azstorage
libfuse:
  attribute-expiration-sec: 120
  entry-expiration-sec: 90
  negative-entry-expiration-sec: 240
file_cache:
  path: /mnt/blobfusetmp
  timeout-sec: 120
  max-size-mb: 4096
block_cache:
  mem-size-mb: 2048
attr_cache:
  timeout-sec: 7200
azstorage:
  type: block
  account-name: myaccount
  container: mycontainer
  subdirectory: /train/
  endpoint: 127.0.0.1:10000/myaccount
  use-http: true
  Mode: KEY
  account-key: c2VjcmV0
  max-retries: 3
  max-retry-timeout-sec: 900
  retry-backoff-sec: 4
  max-retry-delay-sec: 60
  virtual-directory: true
`)
	got, err := loadBlobfuse2(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &blobfuse2Config{
		Path: path, Account: "myaccount", Container: "mycontainer", Prefix: "train",
		Endpoint: "http://127.0.0.1:10000/myaccount", Mode: "key", AccountKey: "c2VjcmV0",
		MaxRetries: 3, TryTimeout: 900 * time.Second, RetryDelay: 4 * time.Second, MaxRetryDelay: time.Minute,
		CacheDir: "/mnt/blobfusetmp", DiskBytes: 4096 << 20, MemBytes: 2048 << 20,
		AttrTimeout: 120 * time.Second, EntryTimeout: 90 * time.Second, NegativeTimeout: 240 * time.Second,
		HasAttrTimeout: true, HasEntryTimeout: true, AllowOther: true, ReadOnlySet: true,
		Ignored: []string{"attr_cache.timeout-sec", "azstorage.virtual-directory", "file_cache.timeout-sec", "logging.level", "logging.type"},
	}
	if fmt.Sprintf("%#v", *got) != fmt.Sprintf("%#v", *want) {
		t.Errorf("loadBlobfuse2 =\n%#v\nwant\n%#v", *got, *want)
	}
	if src, err := got.source(); err != nil || src != "az://myaccount/mycontainer/train" {
		t.Errorf("source() = %q, %v", src, err)
	}
}

func TestBlobfuse2ConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"not yaml", "azstorage: [unclosed", "not valid YAML"},
		{"bad number", "azstorage:\n  max-retries: many\n", "azstorage.max-retries"},
		{"negative size", "file_cache:\n  max-size-mb: -1\n", "file_cache.max-size-mb"},
		{"bad bool", "allow-other: maybe\n", "allow-other"},
		{"bad type", "azstorage:\n  type: files\n", "azstorage.type"},
		{"bad endpoint", "azstorage:\n  endpoint: 'http://u:p@host'\n", "azstorage.endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadBlobfuse2(writeFile(t, "c.yaml", tc.yaml))
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadBlobfuse2 = %v; want a usage error naming %q", err, tc.want)
			}
		})
	}
	if _, err := loadBlobfuse2(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Errorf("loadBlobfuse2 of a missing file succeeded")
	}
}

func TestParseAzureURL(t *testing.T) {
	for _, tc := range []struct {
		in                                   string
		account, container, prefix, endpoint string
		bad                                  bool
	}{
		{in: "az://acct/cont", account: "acct", container: "cont"},
		{in: "az://acct/cont/a/b/", account: "acct", container: "cont", prefix: "a/b"},
		{in: "https://acct.blob.core.windows.net/cont/p", account: "acct", container: "cont", prefix: "p", endpoint: "https://acct.blob.core.windows.net"},
		{in: "https://acct.blob.core.chinacloudapi.cn/cont", account: "acct", container: "cont", endpoint: "https://acct.blob.core.chinacloudapi.cn"},
		{in: "az://acct", bad: true},
		{in: "az://acct/cont/a//b", bad: true},
		{in: "az://user:pw@acct/cont", bad: true},
		{in: "https://example.com/cont", bad: true},
		{in: "https://acct.blob.core.windows.net/cont?sv=1&sig=SECRET", bad: true},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		a, c, p, e, err := parseAzureURL(u)
		if tc.bad {
			if err == nil {
				t.Errorf("parseAzureURL(%q) succeeded", tc.in)
			} else if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "pw") {
				t.Errorf("parseAzureURL(%q) error reveals a secret: %v", tc.in, err)
			}
			continue
		}
		if err != nil || a != tc.account || c != tc.container || p != tc.prefix || e != tc.endpoint {
			t.Errorf("parseAzureURL(%q) = %q %q %q %q, %v", tc.in, a, c, p, e, err)
		}
	}
}

// azDataset starts Azurite and fills a fresh container with the e2e
// dataset; it returns the server, the container and the file paths.
func azDataset(t *testing.T) (*azuritetest.Server, string, []string) {
	t.Helper()
	srv := azuritetest.Start(t)
	c := srv.NewContainer(t)
	files := uploadDataset(t, func(p string, data []byte) { srv.Put(t, c, p, data) })
	return srv, c, files
}

func TestE2EAzureMount(t *testing.T) {
	start := time.Now()
	defer func() { t.Logf("phases done at %v", time.Since(start)) }()
	srv, cont, files := azDataset(t)
	t.Logf("dataset uploaded at %v", time.Since(start))
	const big, bigSize = "big/replaced.bin", 32 << 20
	srv.Put(t, cont, big, pattern(big, bigSize))
	all := append(slices.Clone(files), big)
	slices.Sort(all)

	t.Setenv("AZURE_STORAGE_ACCESS_KEY", azuritetest.Key) // blobfuse2's variable
	mnt := testMountpoint(t)
	startForeground(t, "az://"+azuritetest.Account+"/"+cont, mnt, "--azure-endpoint", srv.Endpoint)

	if got := fileTree(t, mnt, false); !slices.Equal(got, all) {
		t.Fatalf("tree through the mount:\n got %q\nwant %q", got, all)
	}
	t.Logf("mounted and walked at %v", time.Since(start))
	readConcurrently(t, mnt, files, 5)
	t.Logf("read by 16 readers at %v", time.Since(start))

	// Overwrite the big blob after its first bytes were read: a later
	// chunk fails with EIO, and nothing read is of the new version.
	f, err := os.Open(filepath.Join(mnt, big))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := pattern(big, bigSize)
	buf := make([]byte, 64<<10)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, old[:len(buf)]) {
		t.Fatalf("first read of %s: %v", big, err)
	}
	srv.Put(t, cont, big, bytes.Repeat([]byte{0xEE}, bigSize))
	if _, err := f.ReadAt(buf, 28<<20); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of %s at 28 MiB after the blob was overwritten: %v, want EIO", big, err)
	}
	for off := 0; off < bigSize; off += 1 << 20 { // 64 KiB of every MiB
		n, err := f.ReadAt(buf, int64(off))
		if n > 0 && !bytes.Equal(buf[:n], old[off:off+n]) {
			t.Fatalf("read of %s at %d returned bytes of the new version", big, off)
		}
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("read of %s at %d: %v, want data of the old version or EIO", big, off, err)
		}
	}
}

// TestE2EAzureThrottledAndRefused mounts through a proxy that answers 503
// to its first requests (retried: the mount works) and is closed later
// (reads of unread files fail with EIO after bounded retries).
func TestE2EAzureThrottledAndRefused(t *testing.T) {
	srv, cont, files := azDataset(t)
	target, _ := url.Parse(srv.Endpoint)
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	var busy atomic.Int64
	busy.Store(4)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy.Add(-1) >= 0 {
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	t.Setenv("STALLFS_AZURE_ACCOUNT_KEY", azuritetest.Key)
	mnt := testMountpoint(t)
	startForeground(t, "az://"+azuritetest.Account+"/"+cont, mnt,
		"--azure-endpoint", proxy.URL+"/"+azuritetest.Account,
		"--azure-retry-delay", "20ms", "--azure-max-retry-delay", "100ms", "--azure-max-retries", "5",
		"--cache-mem", "0") // every read goes to the store: the test is about the store failing
	if busy.Load() >= 0 {
		t.Fatalf("the proxy refused only %d requests", 4-busy.Load())
	}
	read := files[:len(files)/2]
	readConcurrently(t, mnt, read, 5)

	proxy.Close() // connection refused from now on
	start := time.Now()
	_, err := os.ReadFile(filepath.Join(mnt, "shards/shard-000000.tar"))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read with the store gone: %v, want EIO", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("read with the store gone took %v", took)
	}
}

func TestE2EAzureMountRefused(t *testing.T) {
	srv := azuritetest.Start(t)
	cont := srv.NewContainer(t)
	mnt := testMountpoint(t)
	src := "az://" + azuritetest.Account + "/" + cont
	const wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong key", []string{"mount", src, mnt, "--azure-endpoint", srv.Endpoint, "--azure-account-key", wrong}, "authentication"},
		{"missing container", []string{"mount", src + "-missing", mnt, "--azure-endpoint", srv.Endpoint, "--azure-account-key", azuritetest.Key}, "does not exist"},
		{"key mode without key", []string{"mount", src, mnt, "--azure-endpoint", srv.Endpoint, "--azure-auth-type", "key"}, "no account key"},
		{"unknown auth type", []string{"mount", src, mnt, "--azure-auth-type", "password"}, "--azure-auth-type"},
		{"SAS in the URL", []string{"mount", "https://acct.blob.core.windows.net/c?sv=1&sig=SECRETSIG", mnt}, "--azure-sas"},
		{"config without container", []string{"mount", "--config-file", writeFile(t, "c.yaml", "azstorage:\n  account-name: a\n"), mnt}, "container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := stallfsCmd(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("stallfs %v: exit %d, stderr %q; want exit 2 naming %q", tc.args[:2], code, stderr, tc.want)
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 0 {
				t.Errorf("stderr has %d lines; want one: %q", lines+1, stderr)
			}
			for _, secret := range []string{wrong, azuritetest.Key, "SECRETSIG"} {
				if strings.Contains(stderr, secret) {
					t.Errorf("stderr reveals a secret: %q", stderr)
				}
			}
			if isMounted(mnt) {
				t.Errorf("mounted despite the error")
			}
		})
	}
}

// TestE2EAzureBlobfuse2Config mounts what a blobfuse2 config.yaml (mode
// key, an endpoint without scheme, use-http) describes, with no SOURCE.
func TestE2EAzureBlobfuse2Config(t *testing.T) {
	srv, cont, files := azDataset(t)
	endpoint := strings.TrimPrefix(srv.Endpoint, "http://")
	cfg := writeFile(t, "config.yaml", fmt.Sprintf(`logging:
  type: syslog
  level: log_warning
components:
  - libfuse
  - file_cache
  - attr_cache
  - azstorage
libfuse:
  attribute-expiration-sec: 120
  entry-expiration-sec: 120
  negative-entry-expiration-sec: 240
file_cache:
  path: %s
  timeout-sec: 120
  max-size-mb: 64
attr_cache:
  timeout-sec: 7200
azstorage:
  type: block
  account-name: %s
  account-key: %s
  endpoint: %s
  use-http: true
  mode: key
  container: %s
`, t.TempDir(), azuritetest.Account, azuritetest.Key, endpoint, cont))
	mnt := testMountpoint(t)
	proc := startForegroundArgs(t, mnt, "mount", "--config-file", cfg, mnt)
	want := slices.Clone(files)
	slices.Sort(want)
	if got := fileTree(t, mnt, false); !slices.Equal(got, want) {
		t.Fatalf("tree through the mount:\n got %q\nwant %q", got, want)
	}
	checkFiles(t, mnt, files)
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.waitExit(t, 20*time.Second); err != nil {
		t.Errorf("stallfs mount after SIGTERM: %v", err)
	}
	log := proc.stderr.String() // the process is gone: no more writes
	if !strings.Contains(log, "attr_cache.timeout-sec") || strings.Count(log, "ignoring blobfuse2 keys") != 1 {
		t.Errorf("want one warning naming the ignored keys in %q", log)
	}
	if strings.Contains(log, azuritetest.Key) {
		t.Errorf("the log reveals the account key")
	}
}

// azureOptionsFor parses args with the Azure flags (and the environment)
// and returns the backend options for source with file's settings.
func azureOptionsFor(t *testing.T, source string, file *blobfuse2Config, args ...string) (azblob.Options, error) {
	t.Helper()
	u, err := url.Parse(source)
	if err != nil {
		t.Fatal(err)
	}
	var opts azblob.Options
	var optErr error
	app := &cli.App{
		Name: "t", Flags: azureFlags(),
		Action: func(c *cli.Context) error {
			opts, optErr = azureOptions(c, u, file)
			return nil
		},
	}
	if err := app.Run(append([]string{"t"}, args...)); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	return opts, optErr
}

func TestAzureCredentialSelection(t *testing.T) {
	file := &blobfuse2Config{AccountKey: "ZmlsZWtleQ==", Endpoint: "http://127.0.0.1:1/acct", MaxRetries: 2}
	keyFile := writeFile(t, "key", "a2V5ZmlsZQ==\n")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		file     *blobfuse2Config
		args     []string
		kind     string // Credential.Kind(), or "" for a usage error
		key      string
		endpoint string
	}{
		{name: "nothing is anonymous", kind: "anonymous"},
		{name: "blobfuse2 key variable", env: map[string]string{"AZURE_STORAGE_ACCESS_KEY": "ZW52"}, kind: "key", key: "ZW52"},
		{name: "flag wins over env", env: map[string]string{"AZURE_STORAGE_ACCESS_KEY": "ZW52"}, args: []string{"--azure-account-key", "ZmxhZw=="}, kind: "key", key: "ZmxhZw=="},
		{name: "env wins over file", env: map[string]string{"AZURE_STORAGE_ACCESS_KEY": "ZW52"}, file: file, kind: "key", key: "ZW52", endpoint: file.Endpoint},
		{name: "file alone", file: file, kind: "key", key: "ZmlsZWtleQ==", endpoint: file.Endpoint},
		{name: "key file", args: []string{"--azure-account-key-file", keyFile}, kind: "key", key: "a2V5ZmlsZQ=="},
		{name: "sas variable", env: map[string]string{"AZURE_STORAGE_SAS_TOKEN": "?sv=1&sig=x"}, kind: "sas"},
		{name: "connection string", env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}, kind: "connection-string"},
		{name: "spn from blobfuse2 variables", env: map[string]string{
			"AZURE_STORAGE_SPN_TENANT_ID": "t", "AZURE_STORAGE_SPN_CLIENT_ID": "c", "AZURE_STORAGE_SPN_CLIENT_SECRET": "s"}, kind: "token"},
		{name: "msi by auth type variable", env: map[string]string{"AZURE_STORAGE_AUTH_TYPE": "MSI", "AZURE_STORAGE_IDENTITY_CLIENT_ID": "id"}, kind: "token"},
		{name: "msi with two ids", args: []string{"--azure-auth-type", "msi", "--azure-identity-client-id", "a", "--azure-identity-object-id", "b"}},
		{name: "spn without secret", args: []string{"--azure-auth-type", "spn", "--azure-tenant-id", "t", "--azure-client-id", "c"}},
		{name: "sas mode without sas", args: []string{"--azure-auth-type", "sas"}},
		{name: "endpoint from blobfuse2 variable", env: map[string]string{"AZURE_STORAGE_BLOB_ENDPOINT": "http://127.0.0.1:2/acct"}, kind: "anonymous", endpoint: "http://127.0.0.1:2/acct"},
		{name: "endpoint with credentials", args: []string{"--azure-endpoint", "http://u:p@127.0.0.1/acct"}},
		{name: "bad duration", args: []string{"--azure-try-timeout", "soon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING",
				"AZURE_STORAGE_AUTH_TYPE", "AZURE_STORAGE_BLOB_ENDPOINT", "AZURE_STORAGE_SPN_TENANT_ID", "AZURE_STORAGE_SPN_CLIENT_ID",
				"AZURE_STORAGE_SPN_CLIENT_SECRET", "AZURE_STORAGE_IDENTITY_CLIENT_ID", "AZURE_OAUTH_TOKEN_FILE", "WORKLOAD_IDENTITY_TOKEN"} {
				t.Setenv(k, tc.env[k])
			}
			o, err := azureOptionsFor(t, "az://acct/cont/pre", tc.file, tc.args...)
			if tc.kind == "" {
				var ue *usageError
				if !errors.As(err, &ue) {
					t.Fatalf("azureOptions = %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Account != "acct" || o.Container != "cont" || o.Prefix != "pre" {
				t.Errorf("source = %q %q %q", o.Account, o.Container, o.Prefix)
			}
			if got := o.Credential.Kind(); got != tc.kind {
				t.Errorf("credential kind = %q, want %q", got, tc.kind)
			}
			if tc.key != "" && o.Credential.AccountKey != tc.key {
				t.Errorf("account key = %q, want %q", o.Credential.AccountKey, tc.key)
			}
			if o.Endpoint != tc.endpoint {
				t.Errorf("endpoint = %q, want %q", o.Endpoint, tc.endpoint)
			}
		})
	}
}
