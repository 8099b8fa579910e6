package main

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// blobfuse2Config is what a blobfuse2 config.yaml means to stallfs (see
// docs/blobfuse2.md for the mapping, key by key). Zero values mean "not in
// the file". It holds secrets: it is never logged or formatted whole.
type blobfuse2Config struct {
	Path string // the file it came from

	// azstorage
	Account, Container, Prefix string
	Endpoint                   string // full URL, scheme from use-http when missing
	Mode                       string // key, sas, msi, spn, azcli, workload, connstr ("" = detect)
	AccountKey, SAS            string
	MSIClientID, MSIResourceID string // appid, resid
	MSIObjectID                string // objid
	TenantID, ClientID         string
	ClientSecret               string
	OAuthTokenPath             string // a federated token file (spn)
	WorkloadToken              string // workload-identity-token
	AADEndpoint                string
	MaxRetries                 int
	TryTimeout                 time.Duration // max-retry-timeout-sec
	RetryDelay, MaxRetryDelay  time.Duration // retry-backoff-sec, max-retry-delay-sec
	Concurrency                int           // max-concurrency
	BlockSize                  int64         // block-size-mb, bytes

	// caches
	CacheDir  string // file_cache.path (or block_cache.path)
	DiskBytes int64  // file_cache.max-size-mb (or block_cache.disk-size-mb)
	MemBytes  int64  // block_cache.mem-size-mb

	// libfuse and top level
	AttrTimeout, EntryTimeout, NegativeTimeout time.Duration
	HasAttrTimeout, HasEntryTimeout            bool
	AllowOther                                 bool
	ReadOnlySet                                bool // read-only given (stallfs is read-only whatever it says)

	// Ignored lists the keys present that stallfs does not use, dotted
	// ("file_cache.timeout-sec"), sorted. The caller warns once.
	Ignored []string
}

// source is the SOURCE the file names: az://ACCOUNT/CONTAINER[/PREFIX].
func (b *blobfuse2Config) source() (string, error) {
	if b.Account == "" || b.Container == "" {
		return "", usagef("--config-file %s: azstorage needs account-name and container", b.Path)
	}
	s := "az://" + b.Account + "/" + b.Container
	if b.Prefix != "" {
		s += "/" + b.Prefix
	}
	return s, nil
}

// blobfuse2Key is one key stallfs maps: how to store its value.
type blobfuse2Key func(b *blobfuse2Config, key string, v any) error

// blobfuse2Keys maps dotted, lower-case keys (viper, which blobfuse2 reads
// its file with, ignores case) to their setters.
var blobfuse2Keys = map[string]blobfuse2Key{
	"azstorage.type": func(b *blobfuse2Config, k string, v any) error {
		s, err := yString(k, v)
		if err == nil && s != "" && !strings.EqualFold(s, "block") && !strings.EqualFold(s, "adls") {
			err = fmt.Errorf("%s: unknown account type %q (block or adls)", k, s)
		}
		return err // adls reads the same through the blob endpoint
	},
	"azstorage.account-name": str(func(b *blobfuse2Config) *string { return &b.Account }),
	"azstorage.container":    str(func(b *blobfuse2Config) *string { return &b.Container }),
	"azstorage.subdirectory": str(func(b *blobfuse2Config) *string { return &b.Prefix }),
	"azstorage.endpoint":     str(func(b *blobfuse2Config) *string { return &b.Endpoint }),
	"azstorage.use-http":     nil, // read with endpoint, below
	"azstorage.use-https":    nil, // blobfuse v1 spelling
	"azstorage.mode": func(b *blobfuse2Config, k string, v any) error {
		s, err := yString(k, v)
		b.Mode = strings.ToLower(s)
		return err
	},
	"azstorage.account-key":             str(func(b *blobfuse2Config) *string { return &b.AccountKey }),
	"azstorage.sas":                     str(func(b *blobfuse2Config) *string { return &b.SAS }),
	"azstorage.appid":                   str(func(b *blobfuse2Config) *string { return &b.MSIClientID }),
	"azstorage.resid":                   str(func(b *blobfuse2Config) *string { return &b.MSIResourceID }),
	"azstorage.objid":                   str(func(b *blobfuse2Config) *string { return &b.MSIObjectID }),
	"azstorage.tenantid":                str(func(b *blobfuse2Config) *string { return &b.TenantID }),
	"azstorage.clientid":                str(func(b *blobfuse2Config) *string { return &b.ClientID }),
	"azstorage.clientsecret":            str(func(b *blobfuse2Config) *string { return &b.ClientSecret }),
	"azstorage.oauth-token-path":        str(func(b *blobfuse2Config) *string { return &b.OAuthTokenPath }),
	"azstorage.workload-identity-token": str(func(b *blobfuse2Config) *string { return &b.WorkloadToken }),
	"azstorage.aadendpoint":             str(func(b *blobfuse2Config) *string { return &b.AADEndpoint }),
	"azstorage.max-retries": func(b *blobfuse2Config, k string, v any) error {
		n, err := yInt(k, v, 0, 100)
		b.MaxRetries = int(n)
		return err
	},
	"azstorage.max-retry-timeout-sec": secs(func(b *blobfuse2Config) *time.Duration { return &b.TryTimeout }),
	"azstorage.retry-backoff-sec":     secs(func(b *blobfuse2Config) *time.Duration { return &b.RetryDelay }),
	"azstorage.max-retry-delay-sec":   secs(func(b *blobfuse2Config) *time.Duration { return &b.MaxRetryDelay }),
	"azstorage.max-concurrency": func(b *blobfuse2Config, k string, v any) error {
		n, err := yInt(k, v, 0, 1024)
		b.Concurrency = int(n)
		return err
	},
	"azstorage.block-size-mb": mib(func(b *blobfuse2Config) *int64 { return &b.BlockSize }),

	"file_cache.path":         str(func(b *blobfuse2Config) *string { return &b.CacheDir }),
	"file_cache.max-size-mb":  mib(func(b *blobfuse2Config) *int64 { return &b.DiskBytes }),
	"block_cache.mem-size-mb": mib(func(b *blobfuse2Config) *int64 { return &b.MemBytes }),
	"block_cache.path": func(b *blobfuse2Config, k string, v any) error {
		s, err := yString(k, v)
		if b.CacheDir == "" { // file_cache.path wins
			b.CacheDir = s
		}
		return err
	},
	"block_cache.disk-size-mb": func(b *blobfuse2Config, k string, v any) error {
		n, err := yInt(k, v, 0, math.MaxInt64>>20)
		if b.DiskBytes == 0 {
			b.DiskBytes = n << 20
		}
		return err
	},

	"libfuse.attribute-expiration-sec": func(b *blobfuse2Config, k string, v any) error {
		b.HasAttrTimeout = true
		return secs(func(b *blobfuse2Config) *time.Duration { return &b.AttrTimeout })(b, k, v)
	},
	"libfuse.entry-expiration-sec": func(b *blobfuse2Config, k string, v any) error {
		b.HasEntryTimeout = true
		return secs(func(b *blobfuse2Config) *time.Duration { return &b.EntryTimeout })(b, k, v)
	},
	"libfuse.negative-entry-expiration-sec": secs(func(b *blobfuse2Config) *time.Duration { return &b.NegativeTimeout }),

	"allow-other": func(b *blobfuse2Config, k string, v any) error {
		var err error
		b.AllowOther, err = yBool(k, v)
		return err
	},
	"read-only": func(b *blobfuse2Config, k string, v any) error {
		_, err := yBool(k, v)
		b.ReadOnlySet = true
		return err
	},
	// The pipeline: stallfs has its own; listing it is not "ignoring" it.
	"components": func(*blobfuse2Config, string, any) error { return nil },
}

// loadBlobfuse2 reads and validates a blobfuse2 config file. Errors are
// usage errors that name the key, never its value (it may be a secret).
func loadBlobfuse2(path string) (*blobfuse2Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--config-file %q: %w", path, pathErrCause(err))
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, usagef("--config-file %s: not valid YAML: %s", path, yamlErrLine(err))
	}
	b := &blobfuse2Config{Path: path}
	flat := map[string]any{}
	flatten("", doc, flat)
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set, known := blobfuse2Keys[k]
		switch {
		case !known:
			b.Ignored = append(b.Ignored, k)
		case set != nil:
			if err := set(b, k, flat[k]); err != nil {
				return nil, usagef("--config-file %s: %w", path, err)
			}
		}
	}
	if err := b.finishEndpoint(flat); err != nil {
		return nil, usagef("--config-file %s: %w", path, err)
	}
	b.Prefix = strings.Trim(b.Prefix, "/")
	return b, nil
}

// finishEndpoint adds the scheme to an endpoint without one, as blobfuse2
// does: http with use-http: true (or use-https: false), else https.
func (b *blobfuse2Config) finishEndpoint(flat map[string]any) error {
	useHTTP := false
	if v, ok := flat["azstorage.use-http"]; ok {
		var err error
		if useHTTP, err = yBool("azstorage.use-http", v); err != nil {
			return err
		}
	}
	if v, ok := flat["azstorage.use-https"]; ok {
		https, err := yBool("azstorage.use-https", v)
		if err != nil {
			return err
		}
		useHTTP = !https
	}
	if b.Endpoint == "" {
		return nil
	}
	e := b.Endpoint
	if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		if useHTTP {
			e = "http://" + e
		} else {
			e = "https://" + e
		}
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("azstorage.endpoint: want [http[s]://]HOST[:PORT][/PATH]")
	}
	b.Endpoint = strings.TrimRight(e, "/")
	return nil
}

// flatten turns nested maps into dotted lower-case keys; lists and scalars
// are leaves.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := strings.ToLower(k)
		if prefix != "" {
			key = prefix + "." + key
		}
		if sub, ok := v.(map[string]any); ok {
			flatten(key, sub, out)
			continue
		}
		out[key] = v
	}
}

func str(field func(*blobfuse2Config) *string) blobfuse2Key {
	return func(b *blobfuse2Config, k string, v any) error {
		s, err := yString(k, v)
		*field(b) = s
		return err
	}
}

func secs(field func(*blobfuse2Config) *time.Duration) blobfuse2Key {
	return func(b *blobfuse2Config, k string, v any) error {
		n, err := yInt(k, v, 0, math.MaxInt32)
		*field(b) = time.Duration(n) * time.Second
		return err
	}
}

func mib(field func(*blobfuse2Config) *int64) blobfuse2Key {
	return func(b *blobfuse2Config, k string, v any) error {
		n, err := yInt(k, v, 0, math.MaxInt64>>20)
		*field(b) = n << 20
		return err
	}
}

// yString accepts a scalar (YAML may read a numeric name as a number).
func yString(k string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("%s: want a string", k)
}

// yInt accepts an integer or a string of one, within [lo, hi].
func yInt(k string, v any, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%s: out of range", k)
		}
		n = int64(x)
	case string:
		p, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", k, x)
		}
		n = p
	default:
		return 0, fmt.Errorf("%s: want an integer", k)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s: %d out of range [%d, %d]", k, n, lo, hi)
	}
	return n, nil
}

// yBool accepts YAML booleans and the strings true/false.
func yBool(k string, v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%s: want true or false", k)
}

// yamlErrLine is the first line of a YAML error (which quotes no values).
func yamlErrLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
