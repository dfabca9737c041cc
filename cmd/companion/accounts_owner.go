package main

import (
	"context"
	"fmt"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// accountOwner is who `companion accounts add` adds an account for: a
// desktop data dir has no users and its accounts have the empty owner; a
// serve installation with users needs the owner named (--user), since an
// account whose owner is nobody is seen by nobody.
type accountOwner struct {
	name   string // --user; "" for none
	shared bool   // --shared
	user   auth.User
}

// resolve returns the owner id to add the account under, refusing what
// would make an account nobody can use.
func (a *accountOwner) resolve(ctx context.Context, store auth.Store) (string, error) {
	svc := auth.New(auth.Config{Store: store})
	if a.name == "" {
		if a.shared {
			return "", fmt.Errorf("--shared needs --user naming the admin who owns the account")
		}
		has, err := svc.HasUsers(ctx)
		if err != nil {
			return "", err
		}
		if has {
			return "", fmt.Errorf("this data dir has users (companion serve with sign-in): name the account's owner with --user NAME (companion users list shows them); an account without one would be seen by nobody")
		}
		return "", nil
	}
	u, err := svc.FindUser(ctx, a.name)
	if err != nil {
		return "", err
	}
	if a.shared && !u.Admin {
		return "", fmt.Errorf("only an admin's account may be shared, and %s is not an admin", u.Name)
	}
	a.user = u
	return u.ID, nil
}

func (a *accountOwner) describe() string {
	switch {
	case a.name == "":
		return ""
	case a.shared:
		return ", owned by " + a.user.Name + " and shared with every user"
	}
	return ", owned by " + a.user.Name
}

// seenBy keeps the accounts the user called name sees: theirs and the
// shared ones.
func seenBy(ctx context.Context, store auth.Store, name string, list []core.Account) ([]core.Account, error) {
	u, err := auth.New(auth.Config{Store: store}).FindUser(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []core.Account
	for _, acct := range list {
		if acct.Owner == u.ID || acct.Shared {
			out = append(out, acct)
		}
	}
	return out, nil
}

// ownedBy answers not found unless the user called name owns acct (a
// shared account is its owner's to remove).
func ownedBy(ctx context.Context, store auth.Store, name string, acct core.Account) error {
	u, err := auth.New(auth.Config{Store: store}).FindUser(ctx, name)
	if err != nil {
		return err
	}
	if acct.Owner != u.ID {
		return core.Errorf(core.KindNotFound, "account %q is not %s's", acct.ID, u.Name)
	}
	return nil
}
