package oidclogin

import (
	"flag"
	"log/slog"
)

// Flags are serve's --oidc-* flags, so wiring them is two calls: Register
// on serve's flag set, and Config once --public-url and --base-path (which
// belong to serve, not to this package) are known.
type Flags struct {
	Issuer         string
	ClientID       string
	SecretFile     string
	AllowedDomains string
	Group          string
	GroupClaim     string
}

// Register defines the flags on fs, with their help text.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL, exactly as the provider's discovery document states it (https; http only on loopback)")
	fs.StringVar(&f.ClientID, "oidc-client-id", "", "OpenID Connect client id registered at the provider")
	fs.StringVar(&f.SecretFile, "oidc-client-secret-file", "", "file holding the OpenID Connect client secret (not readable by other users)")
	fs.StringVar(&f.AllowedDomains, "oidc-allowed-domains", "", "comma-separated email domains allowed to sign in with OpenID Connect (verified emails only); empty: any")
	fs.StringVar(&f.Group, "oidc-group", "", "group people must be in to sign in with OpenID Connect; empty: none required")
	fs.StringVar(&f.GroupClaim, "oidc-group-claim", "groups", "claim holding the groups (a dotted path reaches into objects, e.g. realm_access.roles)")
}

// Config reads the client secret file and returns the Config these flags
// describe, for New.
func (f *Flags) Config(publicURL, basePath string, onLogin LoginFunc, log *slog.Logger) (Config, error) {
	secret, err := ReadClientSecretFile(f.SecretFile)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Issuer: f.Issuer, ClientID: f.ClientID, ClientSecret: secret,
		PublicURL: publicURL, BasePath: basePath,
		AllowedDomains: SplitList(f.AllowedDomains),
		RequiredGroup:  f.Group, GroupClaim: f.GroupClaim,
		OnLogin: onLogin, Logger: log,
	}, nil
}
