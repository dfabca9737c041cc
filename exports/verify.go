package exports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// VerifyDir re-checks a committed export: its manifest must say verified
// and every file it lists must hash to the recorded SHA-256. A pipeline
// resumed after a crash calls it before trusting an export it did not see
// finish.
func VerifyDir(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, fmt.Errorf("export %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("export %s: manifest: %w", dir, err)
	}
	if m.Version != ManifestVersion {
		return m, fmt.Errorf("export %s: manifest version %d, want %d", dir, m.Version, ManifestVersion)
	}
	if !m.Verified {
		return m, fmt.Errorf("export %s: manifest is not marked verified", dir)
	}
	e := &Export{w: &Writer{}, staging: dir}
	for _, f := range m.Files {
		if !safeName().MatchString(f.Name) || f.Name == ManifestName {
			return m, fmt.Errorf("export %s: manifest lists unsafe file name %q", dir, f.Name)
		}
		if err := e.verify(f.Name, f.Bytes, f.SHA256); err != nil {
			return m, err
		}
	}
	return m, nil
}
