package exports

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Remove deletes a committed export's directory, which must be one of
// Root's (Root/<workspace>/<export id>), and returns the bytes its files
// held. manifest.json goes first and durably, so a removal cut short
// leaves a directory that no longer reads as verified (VerifyDir) rather
// than half an export that does. A directory already gone is no error.
func (w *Writer) Remove(dir string) (int64, error) {
	rel, err := filepath.Rel(w.Root, filepath.Clean(dir))
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if err != nil || len(parts) != 2 || !safeName().MatchString(parts[0]) || !safeName().MatchString(parts[1]) {
		return 0, fmt.Errorf("export: %s is not an export directory under %s; nothing removed", dir, w.Root)
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("export: remove %s: %w", dir, err)
	case !fi.IsDir():
		return 0, fmt.Errorf("export: %s is not a directory; nothing removed", dir)
	}
	if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("export: remove the manifest of %s (nothing else removed): %w", dir, err)
	}
	if err := syncDir(dir); err != nil {
		return 0, fmt.Errorf("export: fsync %s: %w", dir, err)
	}
	n := filesBytes(dir)
	if err := os.RemoveAll(dir); err != nil {
		return n, fmt.Errorf("export: remove %s: %w", dir, err)
	}
	return n, syncDir(filepath.Dir(dir))
}
