package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"

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
	return parseModuleAt(bytes.NewReader(bin), int64(len(bin)))
}

// parseModuleFile is parseModule for a module read through f, which must
// read at any offset (as embed.FS files do): only the section headers and
// the manifest are read, not the code.
func parseModuleFile(f fs.File) (*manifest.Manifest, []byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	r, ok := f.(io.ReaderAt)
	if !ok {
		return nil, nil, fmt.Errorf("module file %s cannot be read at an offset", st.Name())
	}
	return parseModuleAt(r, st.Size())
}

// parseModuleAt extracts and validates the manifest of the module of size
// bytes in r.
func parseModuleAt(r io.ReaderAt, size int64) (*manifest.Manifest, []byte, error) {
	if size > MaxModuleBytes {
		return nil, nil, core.Errorf(core.KindInvalid, "module is larger than %d MiB", MaxModuleBytes>>20)
	}
	mjson, err := manifest.ExtractAt(r, size)
	if err != nil {
		return nil, nil, invalid(err)
	}
	m, err := parseManifest(mjson)
	if err != nil {
		return nil, nil, err
	}
	return m, mjson, nil
}

// parseManifest validates manifest JSON; a field error keeps its message.
func parseManifest(mjson []byte) (*manifest.Manifest, error) {
	m, err := manifest.Parse(mjson)
	if err != nil {
		var fe *manifest.Error
		if errors.As(err, &fe) {
			return nil, &core.Error{Kind: core.KindInvalid, Message: fe.Error(), Err: err}
		}
		return nil, core.Errorf(core.KindInvalid, "manifest: %v", err)
	}
	return m, nil
}

// ValidateManifest checks manifest JSON as Install would, so tools can
// report problems before packing. The error names the offending field.
func ValidateManifest(manifestJSON []byte) error {
	if _, err := manifest.Parse(manifestJSON); err != nil {
		return invalid(err)
	}
	return nil
}
