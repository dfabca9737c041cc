package exportstore

import (
	"fmt"
	"strings"
)

// ParseRef is the inverse of Ref.Dir: the export a directory (relative
// to the store's prefix) names.
func ParseRef(dir string) (Ref, error) {
	ref, _, ok := parseKey(strings.TrimSuffix(dir, "/") + "/" + ManifestName)
	if !ok {
		return Ref{}, fmt.Errorf("exportstore: %q is not an export's directory (<owner>/<workspace>/<stamp>-<export id>/)", dir)
	}
	return ref, nil
}
