package azblob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/stallfs/stallfs/backend/azblob"
	"github.com/stallfs/stallfs/backend/azblob/azuritetest"
)

// wrongKey is a well-formed key that is not the account's.
const wrongKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="

// noSecret fails if s contains any of the secrets.
func noSecret(t *testing.T, what, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			t.Errorf("%s reveals a secret: %q", what, s)
		}
	}
	if strings.Contains(s, "sig=") {
		t.Errorf("%s reveals a SAS signature: %q", what, s)
	}
}

// sasToken returns a container SAS (query string) with perms.
func sasToken(t *testing.T, srv *azuritetest.Server, container string, perms sas.ContainerPermissions) string {
	t.Helper()
	u, err := srv.Client(t, container).GetSASURL(perms, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, q, _ := strings.Cut(u, "?")
	return q
}

func TestCredentials(t *testing.T) {
	f := newFixture(t, "")
	f.Put(t, "d/x", []byte("hello"))
	srv := f.srv
	base := f.opts
	base.Credential = azblob.Credential{}

	listRead := sasToken(t, srv, f.container, sas.ContainerPermissions{Read: true, List: true})
	readOnly := sasToken(t, srv, f.container, sas.ContainerPermissions{Read: true})
	for _, tc := range []struct {
		name    string
		mod     func(t *testing.T, o *azblob.Options)
		wantErr error // nil: works
	}{
		{"account key", func(t *testing.T, o *azblob.Options) { o.Credential.AccountKey = azuritetest.Key }, nil},
		{"SAS", func(t *testing.T, o *azblob.Options) { o.Credential.SAS = listRead }, nil},
		{"SAS with a leading ?", func(t *testing.T, o *azblob.Options) { o.Credential.SAS = "?" + listRead }, nil},
		{"connection string", func(t *testing.T, o *azblob.Options) {
			o.Credential.ConnectionString, o.Endpoint, o.Account = srv.ConnectionString(), "", ""
		}, nil},
		{"wrong key", func(t *testing.T, o *azblob.Options) { o.Credential.AccountKey = wrongKey }, azblob.ErrAuth},
		{"key not base64", func(t *testing.T, o *azblob.Options) { o.Credential.AccountKey = "not*base64" }, azblob.ErrAuth},
		{"SAS without list", func(t *testing.T, o *azblob.Options) { o.Credential.SAS = readOnly }, azblob.ErrAuth},
		{"SAS tampered", func(t *testing.T, o *azblob.Options) {
			o.Credential.SAS = strings.Replace(listRead, "sig=", "sig=AA", 1)
		}, azblob.ErrAuth},
		{"anonymous on a private container", func(t *testing.T, o *azblob.Options) {}, azblob.ErrAuth},
		{"missing container", func(t *testing.T, o *azblob.Options) {
			o.Credential.AccountKey, o.Container = azuritetest.Key, "nosuchcontainer"
		}, azblob.ErrContainerNotFound},
		{"token that cannot be had", func(t *testing.T, o *azblob.Options) { o.Credential.Token = failingToken{} }, azblob.ErrAuth},
		// No network: with no az binary on PATH, azidentity fails locally.
		{"azure cli not logged in", func(t *testing.T, o *azblob.Options) {
			t.Setenv("PATH", t.TempDir())
			c, err := azblob.NewTokenCredential(azblob.TokenOptions{Method: azblob.MethodAzureCLI})
			if err != nil {
				t.Fatal(err)
			}
			o.Credential.Token = c
		}, azblob.ErrAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mod(t, &o)
			var logs strings.Builder
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			b, err := azblob.New(t.Context(), o)
			secrets := []string{azuritetest.Key, wrongKey, listRead, readOnly, "sekrit-token"}
			noSecret(t, "log", logs.String(), secrets...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("New = %v; want %v", err, tc.wantErr)
				}
				noSecret(t, "error", err.Error(), secrets...)
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer b.Close()
			noSecret(t, "String()", b.String(), secrets...)
			if want := "az://devstoreaccount1/" + f.container; b.String() != want {
				t.Errorf("String() = %q, want %q", b.String(), want)
			}
			e, err := b.Stat(t.Context(), "d/x")
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 5)
			if n, err := b.ReadAt(t.Context(), "d/x", e.Version, p, 0); n != 5 || string(p) != "hello" {
				t.Fatalf("ReadAt = %d %q, %v", n, p, err)
			}
			// Errors of a working backend hide the SAS too.
			_, err = b.ReadAt(t.Context(), "d/x", "0xnotit", p, 0)
			if err == nil {
				t.Fatal("ReadAt of a wrong version succeeded")
			}
			noSecret(t, "read error", err.Error(), secrets...)
		})
	}
}

// failingToken is an Azure AD credential that cannot get a token.
type failingToken struct{}

func (failingToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("no identity endpoint (sekrit-token)")
}

func TestCredentialNeverFormatsItsSecret(t *testing.T) {
	o := azblob.Options{Account: "a", Container: "c", Credential: azblob.Credential{AccountKey: "KEYKEYKEY", SAS: "sv=1&sig=SIGSIG"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		s := fmt.Sprintf(verb, o)
		if strings.Contains(s, "KEYKEYKEY") || strings.Contains(s, "SIGSIG") ||
			strings.Contains(s, "4b45594b4559") { // hex of "KEYKEY"
			t.Errorf("Sprintf(%s, opts) = %s", verb, s)
		}
	}
	if got := o.Credential.Kind(); got != "invalid" {
		t.Errorf("Kind of key+SAS = %q, want invalid", got)
	}
	if _, err := azblob.New(t.Context(), o); err == nil {
		t.Errorf("New with two credentials succeeded")
	}
	to := azblob.TokenOptions{Method: azblob.MethodSPN, TenantID: "t", ClientID: "c", ClientSecret: "CLIENTSECRET"}
	if s := fmt.Sprintf("%v %+v %#v", to, to, to); strings.Contains(s, "CLIENTSECRET") {
		t.Errorf("TokenOptions formatted with its secret: %s", s)
	}
}

func TestNewTokenCredential(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    azblob.TokenOptions
		ok   bool
	}{
		{"msi system-assigned", azblob.TokenOptions{Method: azblob.MethodMSI}, true},
		{"msi client id", azblob.TokenOptions{Method: azblob.MethodMSI, ClientID: "00000000-0000-0000-0000-000000000001"}, true},
		{"msi two ids", azblob.TokenOptions{Method: azblob.MethodMSI, ClientID: "a", ObjectID: "b"}, false},
		{"spn secret", azblob.TokenOptions{Method: azblob.MethodSPN, TenantID: "t", ClientID: "c", ClientSecret: "s"}, true},
		{"spn token file", azblob.TokenOptions{Method: azblob.MethodSPN, TenantID: "t", ClientID: "c", TokenFile: "/x"}, true},
		{"spn no secret", azblob.TokenOptions{Method: azblob.MethodSPN, TenantID: "t", ClientID: "c"}, false},
		{"spn no tenant", azblob.TokenOptions{Method: azblob.MethodSPN, ClientID: "c", ClientSecret: "s"}, false},
		{"spn missing certificate", azblob.TokenOptions{Method: azblob.MethodSPN, TenantID: "t", ClientID: "c", CertificateFile: "/nonexistent.pem"}, false},
		{"workload", azblob.TokenOptions{Method: azblob.MethodWorkload, TenantID: "t", ClientID: "c", TokenFile: "/x"}, true},
		{"azcli", azblob.TokenOptions{Method: azblob.MethodAzureCLI}, true},
		{"unknown", azblob.TokenOptions{Method: "password"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := azblob.NewTokenCredential(tc.o)
			if tc.ok != (err == nil) || tc.ok != (c != nil) {
				t.Errorf("NewTokenCredential(%v) = %v, %v; want ok=%v", tc.o, c, err, tc.ok)
			}
		})
	}
}
