package core

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// AddAccountRequest is what a person supplies to connect a provider account.
type AddAccountRequest struct {
	Provider string
	Label    string
	Config   map[string]string
	// Credentials maps credential names (from the provider's
	// ProviderInfo.Credentials) to secret values. They go to the secret
	// store and are never returned.
	Credentials map[string]string
}

// maxSecretLen keeps credentials inside every OS keyring's limits (Windows
// Credential Manager stores at most 2560 bytes).
const maxSecretLen = 2048

// Accounts lists owner's accounts, sorted by creation time.
func (s *Service) Accounts(ctx context.Context, owner string) ([]Account, error) {
	all, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, a := range all {
		if a.Owner == owner {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// AccountsUsing lists the accounts of every owner that use the named
// provider, e.g. to refuse removing a provider module they depend on.
func AccountsUsing(ctx context.Context, store Store, provider string) ([]Account, error) {
	all, err := store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	var out []Account
	for _, a := range all {
		if a.Provider == provider {
			out = append(out, a)
		}
	}
	return out, nil
}

// Account returns one of owner's accounts.
func (s *Service) Account(ctx context.Context, owner, id string) (Account, error) {
	a, err := s.cfg.Store.GetAccount(ctx, id)
	if err != nil {
		return Account{}, err
	}
	if a.Owner != owner {
		return Account{}, Errorf(KindNotFound, "account %q not found", id)
	}
	return a, nil
}

// AddAccount validates req against the provider's description, stores the
// credentials in the secret store and the account in the store.
func (s *Service) AddAccount(ctx context.Context, owner string, req AddAccountRequest) (Account, error) {
	p, ok := s.cfg.Providers.Lookup(req.Provider)
	if !ok {
		return Account{}, Errorf(KindInvalid, "unknown provider %q; GET /v1/providers lists the installed ones", req.Provider)
	}
	info, err := p.Describe(ctx)
	if err != nil {
		return Account{}, err
	}
	if err := validateAccount(info, req); err != nil {
		return Account{}, err
	}
	if cc, ok := p.(ConfigChecker); ok {
		if err := cc.CheckConfig(req.Config); err != nil {
			return Account{}, err
		}
	}
	acct := Account{
		ID:        NewID("acc"),
		Owner:     owner,
		Provider:  req.Provider,
		Label:     strings.TrimSpace(req.Label),
		Config:    req.Config,
		CreatedAt: s.now(),
	}
	if acct.Label == "" {
		acct.Label = req.Provider
	}
	if acct.Config == nil {
		acct.Config = map[string]string{}
	}
	if len(req.Credentials) > 0 && s.cfg.Secrets == nil {
		return Account{}, Errorf(KindUnavailable, "no secret store is configured, so provider tokens cannot be kept")
	}
	for _, c := range info.Credentials {
		v := req.Credentials[c.Name]
		if err := s.cfg.Secrets.Set(ctx, CredentialKey(acct.ID, c.Name), v); err != nil {
			s.forgetSecrets(ctx, acct)
			return Account{}, err
		}
		acct.Credentials = append(acct.Credentials, c.Name)
	}
	if err := s.verifyAccount(ctx, p, info, acct); err != nil {
		s.forgetSecrets(ctx, acct)
		return Account{}, err
	}
	if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
		s.forgetSecrets(ctx, acct)
		return Account{}, err
	}
	s.log.Info("account added", "account", acct.ID, "provider", acct.Provider)
	s.Kick(acct.ID)
	return acct, nil
}

// EnsureAccount creates an account without credentials with a fixed id if
// it does not exist yet (the local Docker account, say).
func (s *Service) EnsureAccount(ctx context.Context, acct Account) error {
	if _, err := s.cfg.Store.GetAccount(ctx, acct.ID); err == nil {
		return nil
	} else if !IsKind(err, KindNotFound) {
		return err
	}
	if acct.CreatedAt.IsZero() {
		acct.CreatedAt = s.now()
	}
	if acct.Config == nil {
		acct.Config = map[string]string{}
	}
	return s.cfg.Store.PutAccount(ctx, acct)
}

// verifyTimeout bounds the check of a new account's credentials.
const verifyTimeout = 20 * time.Second

// verifyAccount lists the new account's boxes once, so a mistyped token is
// refused when it is added rather than discovered by the reconciler. A
// provider that cannot be reached right now does not block adding the
// account; the reconciler retries.
func (s *Service) verifyAccount(ctx context.Context, p Provider, info ProviderInfo, acct Account) error {
	if !info.Capabilities.List || len(acct.Credentials) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	_, err := p.List(ctx, acct)
	switch KindOf(err) {
	case "":
		return nil
	case KindUnauthorized:
		return &Error{Kind: KindUnauthorized, Message: fmt.Sprintf("%s refused the credentials: %s; check the token and add the account again", info.Name, messageOf(err)), Err: err}
	case KindInvalid:
		return &Error{Kind: KindInvalid, Message: fmt.Sprintf("%s rejected the account settings: %s", info.Name, messageOf(err)), Err: err}
	}
	s.log.Warn("could not verify the new account's credentials now; adding it anyway", "provider", info.Name, "err", messageOf(err), "kind", KindOf(err))
	return nil
}

func validateAccount(info ProviderInfo, req AddAccountRequest) error {
	if utf8.RuneCountInString(req.Label) > 100 {
		return Errorf(KindInvalid, "label is longer than 100 characters")
	}
	known := map[string]bool{}
	for _, f := range info.Config {
		known[f.Name] = true
		if f.Required && strings.TrimSpace(req.Config[f.Name]) == "" {
			return Errorf(KindInvalid, "config field %q is required for provider %s", f.Name, info.Name)
		}
	}
	for k, v := range req.Config {
		if !known[k] {
			return Errorf(KindInvalid, "provider %s has no config field %q", info.Name, k)
		}
		if len(v) > 2048 {
			return Errorf(KindInvalid, "config field %q is longer than 2048 bytes", k)
		}
	}
	wanted := map[string]bool{}
	for _, c := range info.Credentials {
		wanted[c.Name] = true
		v := req.Credentials[c.Name]
		if strings.TrimSpace(v) == "" {
			return Errorf(KindInvalid, "credential %q is required for provider %s", c.Name, info.Name)
		}
		if len(v) > maxSecretLen {
			return Errorf(KindInvalid, "credential %q is longer than %d bytes", c.Name, maxSecretLen)
		}
	}
	for k := range req.Credentials {
		if !wanted[k] {
			return Errorf(KindInvalid, "provider %s takes no credential %q", info.Name, k)
		}
	}
	return nil
}

func (s *Service) forgetSecrets(ctx context.Context, acct Account) {
	if s.cfg.Secrets == nil {
		return
	}
	for _, name := range acct.Credentials {
		if err := s.cfg.Secrets.Delete(ctx, CredentialKey(acct.ID, name)); err != nil && !IsKind(err, KindNotFound) {
			s.log.Warn("could not delete credential", "account", acct.ID, "credential", name, "err", messageOf(err))
		}
	}
}

// RemoveAccount forgets an account: its credentials leave the secret store
// and companion forgets its workspaces. Boxes at the provider are left
// alone (delete them first to destroy them). Refused while an action runs
// on one of its workspaces.
func (s *Service) RemoveAccount(ctx context.Context, owner, id string) error {
	acct, err := s.Account(ctx, owner, id)
	if err != nil {
		return err
	}
	_, live := s.feed.Snapshot()
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	var mine []Workspace
	for _, ws := range live {
		if ws.AccountID != id {
			continue
		}
		unlock, ok := s.locks.tryLock(ws.ID)
		if !ok {
			return &Error{Kind: KindConflict, Message: "an action is running on workspace " + ws.ID + "; try again when it finishes", State: ws.State}
		}
		unlocks = append(unlocks, unlock)
		mine = append(mine, ws)
	}
	for _, ws := range mine {
		ws.Removed = true
		if _, err := s.feed.Save(ctx, ws); err != nil {
			return err
		}
	}
	if err := s.cfg.Store.DeleteAccount(ctx, id); err != nil {
		return err
	}
	s.forgetSecrets(ctx, acct)
	s.log.Info("account removed", "account", id, "forgotten_workspaces", len(mine))
	return nil
}
