package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/azblob"
)

// Azure authentication types of --azure-auth-type (blobfuse2's modes plus
// workload, connstr and anonymous).
const (
	azAuthKey       = "key"
	azAuthSAS       = "sas"
	azAuthMSI       = "msi"
	azAuthSPN       = "spn"
	azAuthCLI       = "azcli"
	azAuthWorkload  = "workload"
	azAuthConnStr   = "connstr"
	azAuthAnonymous = "anonymous"
)

// azureFlags are the flags of az:// and https://ACCOUNT.blob... sources.
// Each reads STALLFS_AZURE_... and, where blobfuse2 has one, blobfuse2's
// environment variable; flags and environment win over --config-file.
func azureFlags() []cli.Flag {
	env := func(names ...string) []string { return names }
	return []cli.Flag{
		&cli.StringFlag{Name: "config-file", Aliases: []string{"config"}, Usage: "mount what a blobfuse2 config `FILE` describes (SOURCE may then be omitted; see docs/blobfuse2.md)", EnvVars: env("STALLFS_CONFIG_FILE")},
		&cli.StringFlag{Name: "azure-endpoint", Usage: "blob service `URL` for emulators, private endpoints and sovereign clouds (e.g. http://127.0.0.1:10000/devstoreaccount1)", EnvVars: env("STALLFS_AZURE_ENDPOINT", "AZURE_STORAGE_BLOB_ENDPOINT")},
		&cli.StringFlag{Name: "azure-auth-type", Usage: "`TYPE`: key, sas, connstr, msi, spn, workload, azcli or anonymous (default: from the credentials given)", EnvVars: env("STALLFS_AZURE_AUTH_TYPE", "AZURE_STORAGE_AUTH_TYPE")},
		&cli.StringFlag{Name: "azure-account-key", Usage: "account `KEY` (prefer the environment or --azure-account-key-file: flags show in ps)", EnvVars: env("STALLFS_AZURE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_KEY")},
		&cli.StringFlag{Name: "azure-account-key-file", Usage: "read the account key from `FILE`", EnvVars: env("STALLFS_AZURE_ACCOUNT_KEY_FILE")},
		&cli.StringFlag{Name: "azure-sas", Usage: "SAS `TOKEN` (the query string of a SAS URL)", EnvVars: env("STALLFS_AZURE_SAS", "AZURE_STORAGE_SAS_TOKEN")},
		&cli.StringFlag{Name: "azure-connection-string", Usage: "account connection `STRING`", EnvVars: env("STALLFS_AZURE_CONNECTION_STRING", "AZURE_STORAGE_CONNECTION_STRING")},
		&cli.StringFlag{Name: "azure-tenant-id", Usage: "Azure AD tenant `ID` (spn, workload, azcli)", EnvVars: env("STALLFS_AZURE_TENANT_ID", "AZURE_STORAGE_SPN_TENANT_ID")},
		&cli.StringFlag{Name: "azure-client-id", Usage: "application (client) `ID` of a service principal or workload identity", EnvVars: env("STALLFS_AZURE_CLIENT_ID", "AZURE_STORAGE_SPN_CLIENT_ID")},
		&cli.StringFlag{Name: "azure-client-secret", Usage: "service principal client `SECRET`", EnvVars: env("STALLFS_AZURE_CLIENT_SECRET", "AZURE_STORAGE_SPN_CLIENT_SECRET")},
		&cli.StringFlag{Name: "azure-client-certificate", Usage: "service principal certificate `FILE` (PEM or PKCS#12, with the private key)", EnvVars: env("STALLFS_AZURE_CLIENT_CERTIFICATE")},
		&cli.StringFlag{Name: "azure-client-certificate-password", Usage: "`PASSWORD` of --azure-client-certificate", EnvVars: env("STALLFS_AZURE_CLIENT_CERTIFICATE_PASSWORD")},
		&cli.StringFlag{Name: "azure-federated-token-file", Usage: "`FILE` holding a federated token (spn, workload; workload defaults to AZURE_FEDERATED_TOKEN_FILE)", EnvVars: env("STALLFS_AZURE_FEDERATED_TOKEN_FILE", "AZURE_OAUTH_TOKEN_FILE")},
		&cli.StringFlag{Name: "azure-federated-token", Hidden: true, Usage: "federated `TOKEN` itself", EnvVars: env("STALLFS_AZURE_FEDERATED_TOKEN", "WORKLOAD_IDENTITY_TOKEN")},
		&cli.StringFlag{Name: "azure-identity-client-id", Usage: "client `ID` of a user-assigned managed identity (msi)", EnvVars: env("STALLFS_AZURE_IDENTITY_CLIENT_ID", "AZURE_STORAGE_IDENTITY_CLIENT_ID")},
		&cli.StringFlag{Name: "azure-identity-resource-id", Usage: "resource `ID` of a user-assigned managed identity (msi)", EnvVars: env("STALLFS_AZURE_IDENTITY_RESOURCE_ID", "AZURE_STORAGE_IDENTITY_RESOURCE_ID")},
		&cli.StringFlag{Name: "azure-identity-object-id", Usage: "object `ID` of a user-assigned managed identity (msi)", EnvVars: env("STALLFS_AZURE_IDENTITY_OBJECT_ID", "AZURE_STORAGE_IDENTITY_OBJECT_ID")},
		&cli.StringFlag{Name: "azure-aad-endpoint", Usage: "Azure AD authority `URL` for sovereign clouds", EnvVars: env("STALLFS_AZURE_AAD_ENDPOINT", "AZURE_STORAGE_AAD_ENDPOINT")},
		// Source parts from blobfuse2's environment, so that
		// `stallfs mount MOUNTPOINT` works with it alone.
		&cli.StringFlag{Name: "azure-account", Hidden: true, Usage: "storage `ACCOUNT` when SOURCE is omitted", EnvVars: env("STALLFS_AZURE_ACCOUNT", "AZURE_STORAGE_ACCOUNT")},
		&cli.StringFlag{Name: "azure-container", Hidden: true, Usage: "`CONTAINER` when SOURCE is omitted", EnvVars: env("STALLFS_AZURE_CONTAINER", "AZURE_STORAGE_ACCOUNT_CONTAINER")},
		&cli.IntFlag{Name: "azure-max-retries", Usage: "retries of a failed request (`N`; 0: 5)", EnvVars: env("STALLFS_AZURE_MAX_RETRIES")},
		&cli.StringFlag{Name: "azure-try-timeout", Usage: "limit of one try of one request (`DURATION`; default 60s)", EnvVars: env("STALLFS_AZURE_TRY_TIMEOUT")},
		&cli.StringFlag{Name: "azure-retry-delay", Usage: "first backoff, doubled per retry (`DURATION`; default 500ms)", EnvVars: env("STALLFS_AZURE_RETRY_DELAY")},
		&cli.StringFlag{Name: "azure-max-retry-delay", Usage: "cap of a backoff and of Retry-After (`DURATION`; default 8s)", EnvVars: env("STALLFS_AZURE_MAX_RETRY_DELAY")},
		&cli.IntFlag{Name: "azure-concurrency", Usage: "parallel ranged GETs of one large read (`N`; default 8)", EnvVars: env("STALLFS_AZURE_CONCURRENCY")},
		&cli.StringFlag{Name: "azure-block-size", Usage: "chunk `SIZE` of the parallel GETs of a large read (default 4MiB)", EnvVars: env("STALLFS_AZURE_BLOCK_SIZE")},
		&cli.IntFlag{Name: "azure-list-concurrency", Usage: "prefixes listed at once when the mount lists the container (`N`, 0-256; 0 and 1: one flat listing, faster on Azurite; try 16 on a real account)", EnvVars: env("STALLFS_AZURE_LIST_CONCURRENCY")},
	}
}

// impliedAzureSource is the SOURCE that --config-file or blobfuse2's
// AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_ACCOUNT_CONTAINER name.
func impliedAzureSource(c *cli.Context) (string, bool, error) {
	if path := c.String("config-file"); path != "" {
		cfg, err := loadBlobfuse2(path)
		if err != nil {
			return "", false, err
		}
		if a := c.String("azure-account"); a != "" {
			cfg.Account = a // flags and environment win over the file
		}
		if k := c.String("azure-container"); k != "" {
			cfg.Container = k
		}
		src, err := cfg.source()
		return src, err == nil, err
	}
	a, k := c.String("azure-account"), c.String("azure-container")
	if a != "" && k != "" {
		return "az://" + a + "/" + k, true, nil
	}
	return "", false, nil
}

// openAzure opens az://ACCOUNT/CONTAINER[/PREFIX] or
// https://ACCOUNT.blob.core.windows.net/CONTAINER[/PREFIX]. Bad input, a
// refused credential and a missing container are usage errors (exit 2),
// reported before anything mounts, in one line without secrets.
func openAzure(ctx context.Context, c *cli.Context, u *url.URL, log *slog.Logger) (backend.Backend, error) {
	var file *blobfuse2Config
	if path := c.String("config-file"); path != "" {
		var err error
		if file, err = loadBlobfuse2(path); err != nil {
			return nil, err
		}
	}
	opts, err := azureOptions(c, u, file)
	if err != nil {
		return nil, err
	}
	opts.Logger = log
	b, err := azblob.New(ctx, opts)
	switch {
	case errors.Is(err, azblob.ErrAuth):
		return nil, usagef("source %s: %w (check the %s credential)", azureSourceName(opts), err, authName(opts))
	case errors.Is(err, azblob.ErrContainerNotFound):
		return nil, usagef("source %s: container %q does not exist", azureSourceName(opts), opts.Container)
	case err != nil:
		return nil, fmt.Errorf("source %s: %w", azureSourceName(opts), err)
	}
	return b, nil
}

func azureSourceName(o azblob.Options) string {
	s := "az://" + o.Account + "/" + o.Container
	if o.Prefix != "" {
		s += "/" + o.Prefix
	}
	return s
}

func authName(o azblob.Options) string { return o.Credential.Kind() }

// azureOptions merges the source URL, the flags (with their environment)
// and a blobfuse2 file into the backend's options; flags win.
func azureOptions(c *cli.Context, u *url.URL, file *blobfuse2Config) (azblob.Options, error) {
	if file == nil {
		file = &blobfuse2Config{}
	}
	var o azblob.Options
	var err error
	if o.Account, o.Container, o.Prefix, o.Endpoint, err = parseAzureURL(u); err != nil {
		return o, err
	}
	pick := func(flag, fromFile string) string {
		if v := c.String(flag); v != "" {
			return v
		}
		return fromFile
	}
	if o.Endpoint == "" {
		o.Endpoint = pick("azure-endpoint", file.Endpoint)
	} else if c.String("azure-endpoint") != "" {
		return o, usagef("source %s names its endpoint; drop --azure-endpoint", u.Redacted())
	}
	if o.Endpoint != "" {
		e, perr := url.Parse(o.Endpoint)
		if perr != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" {
			return o, usagef("--azure-endpoint: want http[s]://HOST[:PORT][/PATH] without credentials")
		}
	}
	if o.Credential, err = azureCredential(c, file); err != nil {
		return o, err
	}
	if o.Credential.ConnectionString != "" && c.String("azure-endpoint") == "" && file.Endpoint == "" {
		o.Endpoint = "" // the connection string names it
	}
	o.MaxRetries = file.MaxRetries
	if c.IsSet("azure-max-retries") {
		o.MaxRetries = c.Int("azure-max-retries")
	}
	o.Concurrency = file.Concurrency
	if c.IsSet("azure-concurrency") {
		o.Concurrency = c.Int("azure-concurrency")
	}
	if o.MaxRetries < 0 || o.Concurrency < 0 || o.Concurrency > 1024 {
		return o, usagef("--azure-max-retries and --azure-concurrency must be within [0, 1024]")
	}
	o.TryTimeout, o.RetryDelay, o.MaxRetryDelay = file.TryTimeout, file.RetryDelay, file.MaxRetryDelay
	for _, d := range []struct {
		flag string
		to   *time.Duration
	}{{"azure-try-timeout", &o.TryTimeout}, {"azure-retry-delay", &o.RetryDelay}, {"azure-max-retry-delay", &o.MaxRetryDelay}} {
		if s := c.String(d.flag); s != "" {
			if *d.to, err = parseDuration(d.flag, s); err != nil {
				return o, err
			}
		}
	}
	o.BlockSize = file.BlockSize
	if s := c.String("azure-block-size"); s != "" {
		if o.BlockSize, err = parseSize("azure-block-size", s, 64<<10, 256<<20); err != nil {
			return o, err
		}
	}
	if o.ListConcurrency = c.Int("azure-list-concurrency"); o.ListConcurrency < 0 || o.ListConcurrency > 256 {
		return o, usagef("--azure-list-concurrency %d: want 0 to 256", o.ListConcurrency)
	}
	return o, nil
}

// parseAzureURL splits az://ACCOUNT/CONTAINER[/PREFIX] and
// https://ACCOUNT.blob.SUFFIX/CONTAINER[/PREFIX] (the latter also gives the
// endpoint).
func parseAzureURL(u *url.URL) (account, container, prefix, endpoint string, err error) {
	switch {
	case u.User != nil:
		return "", "", "", "", usagef("source %s: credentials do not belong in the URL; use --azure-account-key, --azure-sas or the environment", u.Scheme+"://"+u.Host)
	case u.RawQuery != "" || u.ForceQuery:
		// A SAS URL: never echo it.
		return "", "", "", "", usagef("source %s://%s%s: give the SAS with --azure-sas or AZURE_STORAGE_SAS_TOKEN, not in the URL", u.Scheme, u.Host, u.EscapedPath())
	case u.Fragment != "":
		return "", "", "", "", usagef("source %s: unexpected fragment", u.Redacted())
	}
	path := strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "az":
		account = u.Host
		container, prefix, _ = strings.Cut(path, "/")
	case "https", "http":
		host := u.Hostname()
		label, rest, ok := strings.Cut(host, ".")
		if !ok || !strings.HasPrefix(rest, "blob.") {
			return "", "", "", "", usagef("source %s: want https://ACCOUNT.blob.core.windows.net/CONTAINER[/PREFIX] (or az://ACCOUNT/CONTAINER with --azure-endpoint)", u.Redacted())
		}
		account, endpoint = label, u.Scheme+"://"+u.Host
		container, prefix, _ = strings.Cut(path, "/")
	default:
		return "", "", "", "", usagef("source %s: not an Azure Blob URL", u.Redacted())
	}
	src := u.Scheme + "://" + u.Host + u.EscapedPath()
	if account == "" || u.Port() != "" && u.Scheme == "az" {
		return "", "", "", "", usagef("source %q: want az://ACCOUNT/CONTAINER[/PREFIX]", src)
	}
	if container == "" {
		return "", "", "", "", usagef("source %q: no container (want az://ACCOUNT/CONTAINER[/PREFIX])", src)
	}
	if prefix != "" {
		for seg := range strings.SplitSeq(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return "", "", "", "", usagef("source %q: prefix %q has an empty, '.' or '..' segment", src, prefix)
			}
		}
	}
	return account, container, prefix, endpoint, nil
}

// azureCredential picks the credential from --azure-auth-type (or
// blobfuse2's mode), else from what is given: a connection string, a key,
// a SAS, service principal details; none is anonymous access.
func azureCredential(c *cli.Context, file *blobfuse2Config) (azblob.Credential, error) {
	var cred azblob.Credential
	pick := func(flag, fromFile string) string {
		if v := c.String(flag); v != "" {
			return v
		}
		return fromFile
	}
	key := pick("azure-account-key", file.AccountKey)
	if kf := c.String("azure-account-key-file"); kf != "" {
		b, err := os.ReadFile(kf)
		if err != nil {
			return cred, usagef("--azure-account-key-file %q: %w", kf, pathErrCause(err))
		}
		key = strings.TrimSpace(string(b))
	}
	sas := pick("azure-sas", file.SAS)
	conn := c.String("azure-connection-string")
	tok := azblob.TokenOptions{
		TenantID:            pick("azure-tenant-id", file.TenantID),
		ClientID:            pick("azure-client-id", file.ClientID),
		ClientSecret:        pick("azure-client-secret", file.ClientSecret),
		CertificateFile:     c.String("azure-client-certificate"),
		CertificatePassword: c.String("azure-client-certificate-password"),
		TokenFile:           pick("azure-federated-token-file", file.OAuthTokenPath),
		Token:               pick("azure-federated-token", file.WorkloadToken),
		AuthorityHost:       pick("azure-aad-endpoint", file.AADEndpoint),
	}
	mode := strings.ToLower(pick("azure-auth-type", file.Mode))
	if mode == "" {
		switch {
		case conn != "":
			mode = azAuthConnStr
		case key != "":
			mode = azAuthKey
		case sas != "":
			mode = azAuthSAS
		case tok.ClientSecret != "" || tok.CertificateFile != "" || (tok.TenantID != "" && tok.ClientID != "" && (tok.TokenFile != "" || tok.Token != "")):
			mode = azAuthSPN
		default:
			mode = azAuthAnonymous
		}
	}
	missing := func(what string) error {
		return usagef("--azure-auth-type %s: no %s given", mode, what)
	}
	switch mode {
	case azAuthKey:
		if key == "" {
			return cred, missing("account key (--azure-account-key, AZURE_STORAGE_ACCESS_KEY or azstorage.account-key)")
		}
		cred.AccountKey = key
	case azAuthSAS:
		if sas == "" {
			return cred, missing("SAS token (--azure-sas, AZURE_STORAGE_SAS_TOKEN or azstorage.sas)")
		}
		cred.SAS = sas
	case azAuthConnStr:
		if conn == "" {
			return cred, missing("connection string (--azure-connection-string or AZURE_STORAGE_CONNECTION_STRING)")
		}
		cred.ConnectionString = conn
	case azAuthAnonymous:
	case azAuthMSI, azAuthSPN, azAuthWorkload, azAuthCLI:
		tok.Method = mode
		if mode == azAuthMSI {
			tok.ClientID = pick("azure-identity-client-id", file.MSIClientID)
			tok.ResourceID = pick("azure-identity-resource-id", file.MSIResourceID)
			tok.ObjectID = pick("azure-identity-object-id", file.MSIObjectID)
		}
		tc, err := azblob.NewTokenCredential(tok)
		if err != nil {
			return cred, usagef("--azure-auth-type %s: %w", mode, err)
		}
		cred.Token = tc
	default:
		return cred, usagef("--azure-auth-type %q: want key, sas, connstr, msi, spn, workload, azcli or anonymous", mode)
	}
	return cred, nil
}

// blobfuse2Mount is what a --config-file sets beyond the source: the
// settings the mount command owns. Flags given explicitly win.
type blobfuse2Mount struct {
	AllowOther   *bool          // allow-other
	AttrTimeout  *time.Duration // libfuse.attribute-expiration-sec
	EntryTimeout *time.Duration // libfuse.entry-expiration-sec
	CacheDir     string         // file_cache.path
	DiskBytes    int64          // file_cache.max-size-mb
	MemBytes     int64          // block_cache.mem-size-mb
	Ignored      []string       // keys to warn about, once
}

// blobfuse2MountSettings reads --config-file, if any, for the mount
// command: the settings it implies for flags not given explicitly.
func blobfuse2MountSettings(c *cli.Context) (*blobfuse2Mount, error) {
	path := c.String("config-file")
	if path == "" {
		return nil, nil
	}
	f, err := loadBlobfuse2(path)
	if err != nil {
		return nil, err
	}
	m := &blobfuse2Mount{CacheDir: f.CacheDir, DiskBytes: f.DiskBytes, MemBytes: f.MemBytes, Ignored: f.Ignored}
	if f.AllowOther && !c.IsSet("allow-other") {
		m.AllowOther = &f.AllowOther
	}
	if f.HasAttrTimeout && !c.IsSet("attr-timeout") {
		m.AttrTimeout = &f.AttrTimeout
	}
	if f.HasEntryTimeout && !c.IsSet("attr-timeout") {
		m.EntryTimeout = &f.EntryTimeout
	}
	return m, nil
}

// applyBlobfuse2 sets, from --config-file, the mount flags that were not
// given explicitly, and warns once about the file's keys that stallfs does
// not use. The cache settings (CacheDir, DiskBytes, MemBytes) are returned
// for the cache flags to take.
func (a *cliApp) applyBlobfuse2(c *cli.Context, f *mountFlags) (*blobfuse2Mount, error) {
	m, err := blobfuse2MountSettings(c)
	if err != nil || m == nil {
		return nil, err
	}
	if m.AllowOther != nil {
		f.AllowOther = *m.AllowOther
	}
	// stallfs has one timeout for names and attributes: the attribute
	// one, else the entry one.
	switch {
	case m.AttrTimeout != nil:
		f.AttrTimeout = m.AttrTimeout.String()
	case m.EntryTimeout != nil:
		f.AttrTimeout = m.EntryTimeout.String()
	}
	if len(m.Ignored) > 0 {
		fmt.Fprintf(a.stderr, "stallfs: warning: %s: ignoring blobfuse2 keys that stallfs does not use: %s\n",
			c.String("config-file"), strings.Join(m.Ignored, ", "))
	}
	return m, nil
}
