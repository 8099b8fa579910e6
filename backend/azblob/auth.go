package azblob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// storageScope is the Azure AD scope of Azure Storage data access.
const storageScope = "https://storage.azure.com/.default"

// The Azure AD methods of TokenOptions.Method.
const (
	MethodMSI      = "msi"      // managed identity (system- or user-assigned)
	MethodSPN      = "spn"      // service principal: secret, certificate or federated token
	MethodWorkload = "workload" // Kubernetes workload identity
	MethodAzureCLI = "azcli"    // the signed-in Azure CLI user
)

// TokenOptions selects and configures an Azure AD (Entra ID) credential.
// Fields that a method does not use must be empty. It is formatted without
// its secrets.
type TokenOptions struct {
	// Method is MethodMSI, MethodSPN, MethodWorkload or MethodAzureCLI.
	Method string
	// TenantID is the directory (spn, workload; optional for azcli).
	TenantID string
	// ClientID is the application (spn, workload) or the client ID of a
	// user-assigned managed identity (msi).
	ClientID string
	// ResourceID and ObjectID select a user-assigned managed identity
	// instead of ClientID (msi; at most one of the three).
	ResourceID, ObjectID string
	// ClientSecret authenticates a service principal (spn).
	ClientSecret string
	// CertificateFile is a PEM or PKCS#12 file with the service principal's
	// certificate and private key (spn); CertificatePassword unlocks it.
	CertificateFile, CertificatePassword string
	// TokenFile is a file holding a federated token that is presented as
	// the client assertion, re-read whenever a token is needed (spn,
	// workload: default AZURE_FEDERATED_TOKEN_FILE).
	TokenFile string
	// Token is a federated token given directly (spn, workload).
	Token string
	// AuthorityHost is the Azure AD endpoint for sovereign clouds (empty:
	// public cloud, or AZURE_AUTHORITY_HOST).
	AuthorityHost string
}

// String names the method and non-secret identifiers only.
func (o TokenOptions) String() string {
	return fmt.Sprintf("aad(%s tenant=%q client=%q)", o.Method, o.TenantID, o.ClientID)
}

// GoString is String.
func (o TokenOptions) GoString() string { return o.String() }

// NewTokenCredential builds the azidentity credential o describes. It does
// not contact Azure AD; New fetches a token to check it.
func NewTokenCredential(o TokenOptions) (azcore.TokenCredential, error) {
	var copts azcore.ClientOptions
	if o.AuthorityHost != "" {
		copts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: o.AuthorityHost}
	}
	switch o.Method {
	case MethodMSI:
		return newMSI(o, copts)
	case MethodSPN:
		return newSPN(o, copts)
	case MethodWorkload:
		wo := &azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: copts, ClientID: o.ClientID, TenantID: o.TenantID, TokenFilePath: o.TokenFile,
		}
		if o.Token != "" {
			return newAssertion(o, copts)
		}
		return azidentity.NewWorkloadIdentityCredential(wo)
	case MethodAzureCLI:
		return azidentity.NewAzureCLICredential(&azidentity.AzureCLICredentialOptions{TenantID: o.TenantID})
	default:
		return nil, fmt.Errorf("unknown Azure AD method %q (want %s, %s, %s or %s)",
			o.Method, MethodMSI, MethodSPN, MethodWorkload, MethodAzureCLI)
	}
}

func newMSI(o TokenOptions, copts azcore.ClientOptions) (azcore.TokenCredential, error) {
	mo := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: copts}
	n := 0
	if o.ClientID != "" {
		mo.ID, n = azidentity.ClientID(o.ClientID), n+1
	}
	if o.ResourceID != "" {
		mo.ID, n = azidentity.ResourceID(o.ResourceID), n+1
	}
	if o.ObjectID != "" {
		mo.ID, n = azidentity.ObjectID(o.ObjectID), n+1
	}
	if n > 1 {
		return nil, errors.New("managed identity: client ID, resource ID and object ID are mutually exclusive")
	}
	return azidentity.NewManagedIdentityCredential(mo)
}

func newSPN(o TokenOptions, copts azcore.ClientOptions) (azcore.TokenCredential, error) {
	if o.TenantID == "" || o.ClientID == "" {
		return nil, errors.New("service principal: tenant ID and client ID are required")
	}
	switch {
	case o.ClientSecret != "":
		return azidentity.NewClientSecretCredential(o.TenantID, o.ClientID, o.ClientSecret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: copts})
	case o.CertificateFile != "":
		data, err := os.ReadFile(o.CertificateFile)
		if err != nil {
			return nil, fmt.Errorf("service principal certificate: %w", err)
		}
		var pw []byte
		if o.CertificatePassword != "" {
			pw = []byte(o.CertificatePassword)
		}
		certs, key, err := azidentity.ParseCertificates(data, pw)
		if err != nil {
			// The parser's message does not quote the password.
			return nil, fmt.Errorf("service principal certificate %s: %w", o.CertificateFile, err)
		}
		return azidentity.NewClientCertificateCredential(o.TenantID, o.ClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: copts})
	case o.TokenFile != "" || o.Token != "":
		return newAssertion(o, copts)
	default:
		return nil, errors.New("service principal: a client secret, a certificate or a federated token is required")
	}
}

// newAssertion presents a federated token (a file re-read on each use, or
// a fixed string) as the client assertion.
func newAssertion(o TokenOptions, copts azcore.ClientOptions) (azcore.TokenCredential, error) {
	if o.TenantID == "" || o.ClientID == "" {
		return nil, errors.New("federated token: tenant ID and client ID are required")
	}
	file, token := o.TokenFile, o.Token
	get := func(context.Context) (string, error) {
		if token != "" {
			return token, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read federated token file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return azidentity.NewClientAssertionCredential(o.TenantID, o.ClientID, get,
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: copts})
}

// checkToken fetches one token, so a credential that cannot work fails New
// with ErrAuth instead of failing the first read.
func checkToken(ctx context.Context, tc azcore.TokenCredential) error {
	_, err := tc.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{storageScope}})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return &Error{Op: "check", Err: contextCause(ctx.Err())}
	}
	var afe *azidentity.AuthenticationFailedError
	if errors.As(err, &afe) {
		return &Error{Op: "check", Status: statusOf(afe.RawResponse),
			Err: fmt.Errorf("%w: Azure AD refused the credential", ErrAuth)}
	}
	if isCredentialUnavailable(err) {
		// azidentity's own explanation (no IMDS endpoint, no az login,
		// no token file) names no secret and tells the user what to fix.
		return &Error{Op: "check", Err: fmt.Errorf("%w: no Azure AD token: %s", ErrAuth, sanitizeText(err))}
	}
	// Another credential's message is unknown ground: leave it out.
	return &Error{Op: "check", Err: fmt.Errorf("%w: the Azure AD credential returned no token", ErrAuth)}
}
