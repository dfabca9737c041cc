package wasm

import (
	"errors"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
)

// ManifestSection is the name of the custom section that carries a
// module's manifest JSON.
const ManifestSection = manifest.Section

// MaxModuleBytes bounds a module file.
const MaxModuleBytes = manifest.MaxModuleBytes

// Pack validates manifestJSON and returns module with it embedded as the
// companion.manifest custom section, replacing any earlier manifest. The
// manifest is stored compacted, exactly as given otherwise. It is the SDK's
// packer (providers/wasm/sdk/manifest), so `companion providers pack` and
// wasmpack write the same bytes.
func Pack(module, manifestJSON []byte) ([]byte, error) {
	out, err := manifest.Pack(module, manifestJSON)
	if err != nil {
		return nil, invalid(err)
	}
	return out, nil
}

// ManifestJSON returns the manifest embedded in module, unvalidated.
func ManifestJSON(module []byte) ([]byte, error) {
	b, err := manifest.Extract(module)
	if err != nil {
		return nil, invalid(err)
	}
	return b, nil
}

// invalid marks a format error as the user's: a field error keeps its
// message, which names the field.
func invalid(err error) error {
	return &core.Error{Kind: core.KindInvalid, Message: err.Error(), Err: err}
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
		return invalid(err)
	}
	return nil
}
