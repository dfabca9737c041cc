package core

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
	// Shared makes the account usable by every user of a serve
	// installation (each workspace stays its creator's); the caller
	// checks that the owner may share (an admin).
	Shared bool
}

// maxSecretLen keeps credentials inside every OS keyring's limits (Windows
// Credential Manager stores at most 2560 bytes).
const maxSecretLen = 2048

// Accounts lists owner's accounts and the shared ones, sorted by creation
// time.
func (s *Service) Accounts(ctx context.Context, owner string) ([]Account, error) {
	all, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, a := range all {
		if a.Owner == owner || a.Shared {
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

// Account returns one of owner's accounts, or a shared one.
func (s *Service) Account(ctx context.Context, owner, id string) (Account, error) {
	a, err := s.cfg.Store.GetAccount(ctx, id)
	if err != nil {
		return Account{}, err
	}
	if a.Owner != owner && !a.Shared {
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
		Shared:    req.Shared,
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
	if !info.Capabilities.List || len(acct.Credentials) == 0 {
		// Nothing to check the credentials with; the reconciler's first
		// pass reports on the account.
		if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
			s.forgetSecrets(ctx, acct)
			return Account{}, err
		}
		s.log.Info("account added", "account", acct.ID, "provider", acct.Provider)
		s.noteAccountsChanged()
		s.Kick(acct.ID)
		return acct, nil
	}
	return s.addChecked(ctx, p, info, acct)
}

// EnsureAccount creates an account without credentials with a fixed id if
// it does not exist yet (the local Docker account, say), and returns the
// account as stored: the one found, or acct as created.
func (s *Service) EnsureAccount(ctx context.Context, acct Account) (Account, error) {
	if have, err := s.cfg.Store.GetAccount(ctx, acct.ID); err == nil {
		return have, nil
	} else if !IsKind(err, KindNotFound) {
		return Account{}, err
	}
	if acct.CreatedAt.IsZero() {
		acct.CreatedAt = s.now()
	}
	if acct.Config == nil {
		acct.Config = map[string]string{}
	}
	if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
		return Account{}, err
	}
	s.noteAccountsChanged()
	return acct, nil
}

// addChecked lists the new account's boxes once, so a mistyped token is
// refused when it is added rather than discovered by the reconciler. The
// answer waits at most Config.AddAccountWait for that list: a provider
// that is slower (or unreachable) does not hold the request; the account
// is added in state "checking" and the list goes on in the background,
// its outcome arriving as an account event (SubscribeAccounts). Either way
// the boxes it found are adopted in the background.
func (s *Service) addChecked(ctx context.Context, p Provider, info ProviderInfo, acct Account) (Account, error) {
	type outcome struct {
		boxes []Box
		err   error
	}
	if pr, ok := p.(Preparer); ok {
		if err := pr.Prepare(ctx); err != nil {
			s.forgetSecrets(ctx, acct)
			return Account{}, err
		}
	}
	s.status.tryBusy(acct.ID) // a new id: the reconciler leaves it alone until the list is done
	first := make(chan outcome, 1)
	s.goBackground(func(bg context.Context) {
		cctx, cancel := s.callCtx(bg)
		boxes, err := p.List(cctx, acct)
		cancel()
		first <- outcome{boxes, err}
	})
	wait := s.cfg.Clock.NewTimer(s.cfg.AddAccountWait)
	defer wait.Stop()
	var o outcome
	checked := false
	select {
	case o = <-first:
		checked = true
		if k := KindOf(o.err); k == KindUnauthorized || k == KindInvalid {
			s.status.forget(acct.ID)
			s.forgetSecrets(ctx, acct)
			return Account{}, &Error{Kind: k, Message: accountProblem(info.Name, o.err), Err: o.err}
		}
		first <- o // for the background part below
	case <-wait.C():
	}
	if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
		s.status.forget(acct.ID)
		s.forgetSecrets(ctx, acct)
		return Account{}, err
	}
	s.noteAccountsChanged()
	now := s.now()
	s.setStatus(acct, func(st *AccountStatus) {
		switch {
		case !checked:
			st.State, st.Message = AccountChecking, info.Name+" has not answered the first list yet; the outcome arrives as an account event"
		case o.err == nil:
			st.State, st.LastOKAt = AccountOK, now
		default:
			st.State, st.Kind, st.Message = AccountFailing, KindOf(o.err), accountProblem(info.Name, o.err)
		}
	})
	s.log.Info("account added", "account", acct.ID, "provider", acct.Provider, "checked", checked)
	s.audit(ctx, AuditEntry{Owner: acct.Owner, Actor: ActorOf(ctx, ActorReconciler), Action: AuditAccountAdd,
		AccountID: acct.ID, Provider: acct.Provider, Outcome: "ok"})
	s.goBackground(func(bg context.Context) {
		defer s.status.done(acct.ID)
		var res outcome
		select {
		case res = <-first:
		case <-bg.Done():
			return
		}
		if _, err := s.cfg.Store.GetAccount(bg, acct.ID); err != nil {
			return // removed meanwhile
		}
		if res.err == nil {
			res.err = s.applyList(bg, acct, p, res.boxes)
		}
		if res.err != nil && bg.Err() == nil {
			s.log.Warn("first list of the new account failed", "account", acct.ID, "provider", acct.Provider, "err", messageOf(res.err), "kind", KindOf(res.err))
			s.setStatus(acct, func(st *AccountStatus) {
				st.State, st.Kind, st.Message = AccountFailing, KindOf(res.err), accountProblem(info.Name, res.err)
			})
		}
	})
	return acct, nil
}

// accountProblem is the person-facing text of a failed list of an account.
func accountProblem(provider string, err error) string {
	switch KindOf(err) {
	case KindUnauthorized:
		return fmt.Sprintf("%s refused the credentials: %s; check the token and add the account again", provider, messageOf(err))
	case KindInvalid:
		return fmt.Sprintf("%s rejected the account settings: %s", provider, messageOf(err))
	}
	return messageOf(err)
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
	if acct.Owner != owner { // a shared account is its owner's to remove
		return Errorf(KindNotFound, "account %q not found", id)
	}
	live := s.feed.OfAccount(id)
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
		// On a shared store, taking the lease brought the feed up to date:
		// save the current copy, not the one read before the lock.
		if cur, ok := s.feed.Get(ws.ID); ok {
			mine = append(mine, cur)
		}
	}
	for _, ws := range mine {
		ws.Removed = true
		if _, err := s.feed.Save(ctx, ws); err != nil {
			return err
		}
		s.forgetAgentKey(ctx, ws.ID)
	}
	if err := s.cfg.Store.DeleteAccount(ctx, id); err != nil {
		return err
	}
	s.noteAccountsChanged()
	s.forgetSecrets(ctx, acct)
	s.status.forget(id)
	s.log.Info("account removed", "account", id, "forgotten_workspaces", len(mine))
	s.audit(ctx, AuditEntry{Owner: acct.Owner, Actor: ActorOf(ctx, ActorReconciler), Action: AuditAccountRemove,
		AccountID: acct.ID, Provider: acct.Provider, Outcome: fmt.Sprintf("ok (%d workspaces forgotten)", len(mine))})
	return nil
}
