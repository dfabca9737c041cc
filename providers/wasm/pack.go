package wasm

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/wasmbin"
)

// ManifestSection is the name of the custom section that carries a
// module's manifest JSON.
const ManifestSection = "companion.manifest"

// MaxModuleBytes bounds a module file.
const MaxModuleBytes = 32 << 20

// Pack validates manifestJSON and returns module with it embedded as the
// companion.manifest custom section, replacing any earlier manifest. The
// manifest is stored compacted, exactly as given otherwise.
func Pack(module, manifestJSON []byte) ([]byte, error) {
	if _, err := manifest.Parse(manifestJSON); err != nil {
		return nil, core.Errorf(core.KindInvalid, "%v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, manifestJSON); err != nil {
		return nil, core.Errorf(core.KindInvalid, "manifest: %v", err)
	}
	out, err := wasmbin.SetCustomSection(module, ManifestSection, buf.Bytes())
	if err != nil {
		return nil, core.Errorf(core.KindInvalid, "module %v", err)
	}
	return out, nil
}

// ManifestJSON returns the manifest embedded in module, unvalidated.
func ManifestJSON(module []byte) ([]byte, error) {
	secs, err := wasmbin.CustomSections(module, ManifestSection)
	if err != nil {
		return nil, core.Errorf(core.KindInvalid, "module %v", err)
	}
	switch len(secs) {
	case 0:
		return nil, core.Errorf(core.KindInvalid, "module has no %s section: embed its manifest with companion providers pack (see ABI.md)", ManifestSection)
	case 1:
		return bytes.Clone(secs[0]), nil
	}
	return nil, core.Errorf(core.KindInvalid, "module has %d %s sections; it must have exactly one", len(secs), ManifestSection)
}

// parseModule extracts and validates a module's manifest.
func parseModule(bin []byte) (*manifest.Manifest, []byte, error) {
	if len(bin) > MaxModuleBytes {
		return nil, nil, core.Errorf(core.KindInvalid, "module is larger than %d MiB", MaxModuleBytes>>20)
	}
	mjson, err := ManifestJSON(bin)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(mjson)
	if err != nil {
		var fe *manifest.Error
		if errors.As(err, &fe) {
			return nil, nil, &core.Error{Kind: core.KindInvalid, Message: fe.Error(), Err: err}
		}
		return nil, nil, core.Errorf(core.KindInvalid, "manifest: %v", err)
	}
	return m, mjson, nil
}

// ValidateManifest checks manifest JSON as Install would, so tools can
// report problems before packing. The error names the offending field.
func ValidateManifest(manifestJSON []byte) error {
	if _, err := manifest.Parse(manifestJSON); err != nil {
		return core.Errorf(core.KindInvalid, "%v", err)
	}
	return nil
}
