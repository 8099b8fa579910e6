package azblob

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Defaults for the zero values of Options.
const (
	// DefaultMaxRetries is how often a failed request is retried. With
	// DefaultRetryDelay and DefaultMaxRetryDelay the waits are about
	// 0.5+1+2+4+8 s: a store that stays down fails a read in ~16 s plus the
	// tries themselves, not minutes.
	DefaultMaxRetries = 5
	// DefaultRetryDelay is the first backoff; it doubles on each retry
	// (with jitter) up to DefaultMaxRetryDelay.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultMaxRetryDelay caps a backoff and a server's Retry-After.
	DefaultMaxRetryDelay = 8 * time.Second
	// DefaultTryTimeout bounds one try of one request, body included (a
	// BlockSize chunk at a few MB/s).
	DefaultTryTimeout = 60 * time.Second
	// DefaultConcurrency is how many chunks of one large read are fetched
	// at once.
	DefaultConcurrency = 8
	// DefaultBlockSize is the chunk of a large read: a read of more than
	// this is split into parallel ranged GETs.
	DefaultBlockSize = 4 << 20
	// DefaultListConcurrency is how many prefixes Walk lists at once: 1,
	// one flat listing. The parallel walk is there (ListConcurrency 16)
	// but not the default: Azurite answers every listing by scanning the
	// whole container, so 157 prefix listings of a 200,000-blob container
	// cost 157 scans where the flat listing costs 40 pages, and 16 at once
	// ran past the try timeout (docs/scale-listing.md); it is not measured
	// against Azure itself yet.
	DefaultListConcurrency = 1
)

// Options configures New. Account and Container are required unless
// Credential.ConnectionString names the account; everything else has a
// working zero value.
type Options struct {
	// Account is the storage account name.
	Account string
	// Container is the container to serve.
	Container string
	// Prefix serves only the blobs below this "directory" of the
	// container ("train" serves "train/..."). Leading and trailing slashes
	// are ignored.
	Prefix string
	// Endpoint is the blob service URL, for emulators, private endpoints
	// and sovereign clouds: "http://127.0.0.1:10000/devstoreaccount1",
	// "https://ACCOUNT.blob.core.chinacloudapi.cn". Empty:
	// https://ACCOUNT.blob.core.windows.net (or the connection string's).
	Endpoint string
	// Credential authenticates requests. The zero value is anonymous
	// access (a public container).
	Credential Credential

	// MaxRetries is how often a failed request is retried (0:
	// DefaultMaxRetries; negative: never).
	MaxRetries int
	// TryTimeout bounds one try of one request (0: DefaultTryTimeout).
	TryTimeout time.Duration
	// RetryDelay is the first backoff (0: DefaultRetryDelay).
	RetryDelay time.Duration
	// MaxRetryDelay caps backoffs and Retry-After (0: DefaultMaxRetryDelay).
	MaxRetryDelay time.Duration
	// Concurrency is how many chunks of one read run at once (0:
	// DefaultConcurrency).
	Concurrency int
	// BlockSize is the chunk size of large reads (0: DefaultBlockSize).
	BlockSize int64
	// ListPageSize is the number of names asked for per listing page (0:
	// the service's maximum, 5,000).
	ListPageSize int
	// ListConcurrency bounds the listings one Walk runs at once: above 1,
	// it lists the top levels of the subtree with a delimiter, then the
	// prefixes found there in parallel, each paginated (0:
	// DefaultListConcurrency; 1 or less: one flat listing).
	ListConcurrency int

	// Logger receives setup and listing notices (nil: discard). Reads are
	// counted in Stats, not logged.
	Logger *slog.Logger
}

// Credential is how requests are authenticated: exactly one of its fields
// is set, or none for anonymous access. Its String and LogValue name the
// kind only, so a Credential can be logged or printed safely.
type Credential struct {
	// AccountKey is the base64 shared key of Options.Account.
	AccountKey string
	// SAS is a shared access signature token: the query string of a SAS
	// URL, with or without the leading "?".
	SAS string
	// ConnectionString is an account connection string
	// ("DefaultEndpointsProtocol=...;AccountName=...;AccountKey=...", or one
	// with BlobEndpoint= and SharedAccessSignature=).
	ConnectionString string
	// Token is an Azure AD (Entra ID) credential; see NewTokenCredential.
	Token azcore.TokenCredential
}

// Kind names the credential's kind: "key", "sas", "connection-string",
// "token" or "anonymous"; "invalid" when more than one field is set.
func (c Credential) Kind() string {
	var kinds []string
	if c.AccountKey != "" {
		kinds = append(kinds, "key")
	}
	if c.SAS != "" {
		kinds = append(kinds, "sas")
	}
	if c.ConnectionString != "" {
		kinds = append(kinds, "connection-string")
	}
	if c.Token != nil {
		kinds = append(kinds, "token")
	}
	switch len(kinds) {
	case 0:
		return "anonymous"
	case 1:
		return kinds[0]
	default:
		return "invalid"
	}
}

// String names the kind of credential, never its secret.
func (c Credential) String() string { return "credential(" + c.Kind() + ")" }

// GoString is String, so %#v does not print the secret either.
func (c Credential) GoString() string { return c.String() }

// LogValue is String, for log/slog.
func (c Credential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Format prints String for every verb, so no formatting of a Credential
// (or of a struct holding one) reveals the secret.
func (c Credential) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// withDefaults returns o with zero values replaced and names cleaned.
func (o Options) withDefaults() Options {
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.TryTimeout <= 0 {
		o.TryTimeout = DefaultTryTimeout
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.ListConcurrency == 0 {
		o.ListConcurrency = DefaultListConcurrency
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Prefix = strings.Trim(o.Prefix, "/")
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	return o
}
