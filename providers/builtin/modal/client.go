package modal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	modalsdk "github.com/modal-labs/modal-client/go"
)

// client is one account's SDK client with what it was made from.
type client struct {
	sdk         *modalsdk.Client
	fingerprint string // of the credentials and server URL it was made with
	secret      string // token secret, for the agent-server key
	local       bool   // the control plane is on loopback over http (an emulator)
}

// clientFor returns acct's SDK client, made again when its credentials or
// server URL changed. Credentials come from the secret store only: never
// from companion's environment or from SQLite.
func (p *Provider) clientFor(ctx context.Context, acct core.Account) (*client, error) {
	if p.cfg.Secrets == nil {
		return nil, core.Errorf(core.KindUnavailable, "modal: no secret store to read account %s's token from", acct.ID)
	}
	id, err := p.cfg.Secrets.Get(ctx, core.CredentialKey(acct.ID, CredTokenID))
	if err != nil {
		return nil, credErr(acct, CredTokenID, err)
	}
	secret, err := p.cfg.Secrets.Get(ctx, core.CredentialKey(acct.ID, CredTokenSecret))
	if err != nil {
		return nil, credErr(acct, CredTokenSecret, err)
	}
	serverURL := strings.TrimSpace(acct.Config[ConfigServerURL])
	local, err := checkServerURL(serverURL)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(id + "\x00" + secret + "\x00" + serverURL + "\x00" + acct.Config[ConfigEnvironment]))
	fp := hex.EncodeToString(sum[:])

	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[acct.ID]; ok {
		if c.fingerprint == fp {
			return c, nil
		}
		c.sdk.Close()
		delete(p.clients, acct.ID)
	}
	noThrottleWait := time.Duration(0) // companion's own backoff honours the retry policy
	params := &modalsdk.ClientParams{TokenID: id, TokenSecret: secret, Environment: acct.Config[ConfigEnvironment],
		Logger: p.log, MaxThrottleWait: &noThrottleWait}
	if err := setProfile(params, serverURL); err != nil {
		return nil, core.Errorf(core.KindInternal, "modal: cannot configure the SDK: %v", err)
	}
	sdk, err := modalsdk.NewClientWithOptions(params)
	if err != nil {
		return nil, wrap(err, "connect", "", secret)
	}
	c := &client{sdk: sdk, fingerprint: fp, secret: secret, local: local}
	p.clients[acct.ID] = c
	return c, nil
}

func credErr(acct core.Account, name string, err error) error {
	if core.IsKind(err, core.KindNotFound) {
		return core.Errorf(core.KindUnauthorized, "modal account %s has no %s in the secret store: add the account again with its token", acct.ID, name)
	}
	return fmt.Errorf("read modal %s of account %s: %w", name, acct.ID, err)
}

// checkServerURL accepts "" (Modal itself), any https URL, and http only
// on a loopback host (an emulator: the SDK then speaks plaintext HTTP/2,
// and so does the command router). It reports whether the URL is local.
func checkServerURL(raw string) (bool, error) {
	if raw == "" {
		return false, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false, core.Errorf(core.KindInvalid, "modal server_url %q is not a URL such as https://api.modal.com:443", raw)
	}
	switch u.Scheme {
	case "https":
		return false, nil
	case "http":
		switch u.Hostname() {
		case "127.0.0.1", "localhost", "::1":
			return true, nil
		}
		return false, core.Errorf(core.KindInvalid, "modal server_url %q: plain http is allowed only on loopback (an emulator); use https", raw)
	}
	return false, core.Errorf(core.KindInvalid, "modal server_url %q: want https:// (or http:// on loopback)", raw)
}

// setProfile hands the SDK a profile of its own instead of ~/.modal.toml:
// the server URL (empty: Modal's default) and V1 sandboxes (V2 ones are
// not listed by SandboxList). ClientParams.Config has an unexported type,
// so it is built by reflection from the field's own type; its fields are
// exported. Environment variables (MODAL_SERVER_URL, MODAL_SANDBOX_V2)
// still override it inside the SDK, which the guide says.
func setProfile(params *modalsdk.ClientParams, serverURL string) error {
	f := reflect.ValueOf(params).Elem().FieldByName("Config")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.Type().Elem().Kind() != reflect.Map {
		return fmt.Errorf("ClientParams.Config is not a pointer to a map of profiles")
	}
	mapType := f.Type().Elem()
	prof := reflect.New(mapType.Elem()).Elem()
	set := func(name string, v reflect.Value) error {
		fv := prof.FieldByName(name)
		if !fv.IsValid() || !fv.CanSet() {
			return fmt.Errorf("profile has no settable field %s", name)
		}
		fv.Set(v)
		return nil
	}
	if serverURL != "" {
		if err := set("ServerURL", reflect.ValueOf(serverURL)); err != nil {
			return err
		}
	}
	v1 := false
	if err := set("SandboxV2", reflect.ValueOf(&v1)); err != nil {
		return err
	}
	if err := set("Active", reflect.ValueOf(true)); err != nil {
		return err
	}
	m := reflect.MakeMap(mapType)
	m.SetMapIndex(reflect.ValueOf("companion").Convert(mapType.Key()), prof)
	ptr := reflect.New(mapType)
	ptr.Elem().Set(m)
	f.Set(ptr)
	return nil
}
