package exportstore

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Layout of a store (see README of the decision in docs/decisions.md):
//
//	<prefix>/<owner>/<workspace>/<stamp>-<export id>/<file>
//	<prefix>/<owner>/<workspace>/<stamp>-<export id>/manifest.json
//
// stamp is the export's begin time in UTC as 20060102T150405Z. An export
// whose directory holds manifest.json is committed; one without is
// staging (being written, or left by an upload that died).

// ManifestName is the commit point: written last, an export is committed
// once it exists.
const ManifestName = "manifest.json"

// OwnerPlaceholder is the owner segment of exports that have no owner
// (the desktop has one person and no user ids). It cannot collide with a
// real owner: a safe segment starts with a letter or digit.
const OwnerPlaceholder = "_"

// stampLayout formats an export's begin time in its directory name.
const stampLayout = "20060102T150405Z"

// safeSegment is compiled on first use, as in package exports.
var safeSegment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`) })

// checkSegment refuses anything but a safe name: no slash, no leading
// dot (so no ".."), at most 200 characters.
func checkSegment(what, s string) error {
	if !safeSegment().MatchString(s) {
		return fmt.Errorf("exportstore: %s %q is not a safe name (letters, digits, '.', '_', '-'; not starting with '.', '_' or '-')", what, s)
	}
	return nil
}

// Ref names one export in a store.
type Ref struct {
	// Owner is "" for exports without an owner (OwnerPlaceholder in the
	// store).
	Owner     string
	Workspace string
	// ID is the export's id as the caller gave it to Begin (its record).
	ID string
	// Stamp is when the export began (UTC, whole seconds).
	Stamp time.Time
}

// Dir is the export's directory relative to the store's prefix, with a
// trailing slash.
func (r Ref) Dir() string {
	return ownerSegment(r.Owner) + "/" + r.Workspace + "/" + r.Stamp.UTC().Format(stampLayout) + "-" + r.ID + "/"
}

func (r Ref) check() error {
	if r.Owner != "" {
		if err := checkSegment("owner", r.Owner); err != nil {
			return err
		}
	}
	if err := checkSegment("workspace", r.Workspace); err != nil {
		return err
	}
	if err := checkSegment("export id", r.ID); err != nil {
		return err
	}
	if r.Stamp.IsZero() {
		return fmt.Errorf("exportstore: export %s has no time", r.ID)
	}
	return nil
}

func ownerSegment(owner string) string {
	if owner == "" {
		return OwnerPlaceholder
	}
	return owner
}

// parseKey splits a key relative to the prefix into its export and file
// name. ok is false for a key that is not in the layout (it is then
// never listed, swept or trusted).
func parseKey(rel string) (ref Ref, file string, ok bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 4 {
		return Ref{}, "", false
	}
	owner, ws, dir, file := parts[0], parts[1], parts[2], parts[3]
	if owner == OwnerPlaceholder {
		owner = ""
	} else if checkSegment("owner", owner) != nil {
		return Ref{}, "", false
	}
	stamp, id, found := strings.Cut(dir, "-")
	if !found || checkSegment("workspace", ws) != nil || checkSegment("export id", id) != nil ||
		checkSegment("file", file) != nil {
		return Ref{}, "", false
	}
	t, err := time.Parse(stampLayout, stamp)
	if err != nil {
		return Ref{}, "", false
	}
	return Ref{Owner: owner, Workspace: ws, ID: id, Stamp: t}, file, true
}
