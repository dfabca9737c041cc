package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/sandbox"
)

// Inspect validates a module without installing it: its manifest, its
// imports and exports against the ABI, its capabilities against its
// exports, and the ABI version it reports (which needs one instance, run
// in the sandbox). Nothing is kept, not even compiled code: anyone may
// inspect modules they never install.
func (h *Host) Inspect(ctx context.Context, bin []byte) (Summary, error) {
	return h.validate(ctx, bin, false)
}

// validate is Inspect; with keep the compiled code goes to the host's
// cache, so that loading the module after installing it is quick.
func (h *Host) validate(ctx context.Context, bin []byte, keep bool) (Summary, error) {
	m, _, err := parseModule(bin)
	if err != nil {
		return Summary{}, err
	}
	var mod *sandbox.Module
	drop := func() {}
	if keep {
		mod, err = h.compile(ctx, m.Name, m, bin, &LoadInfo{})
	} else {
		mod, drop, err = h.compileThrowaway(ctx, m, bin)
	}
	if err == nil {
		if err = mod.CheckCapabilities(core.Capabilities(m.Capabilities)); err == nil {
			err = mod.Warm(ctx, m.ABIVersion)
		}
		_ = mod.Close(context.Background())
		drop()
	}
	if err != nil {
		return Summary{}, &core.Error{Kind: core.KindInvalid, Message: fmt.Sprintf("provider module %s is not usable: %v", m.Name, err), Err: err}
	}
	return summarize(m, sha256Hex(bin), false), nil
}

// Install validates a module (as Inspect does), stores it as
// <ModulesDir>/<name>.wasm and pins its SHA-256 and manifest. A module of
// the same name is replaced; call Load afterwards to (re)load it. To show a
// person the summary before they confirm, call Inspect and then Install
// with the same bytes.
func (h *Host) Install(ctx context.Context, bin []byte) (Summary, error) {
	if err := h.needInstallDirs(); err != nil {
		return Summary{}, err
	}
	m, mjson, err := parseModule(bin)
	if err != nil {
		return Summary{}, err
	}
	if err := h.nameFree(m.Name); err != nil {
		return Summary{}, err
	}
	sum, err := h.validate(ctx, bin, true)
	if err != nil {
		return Summary{}, err
	}
	h.installMu.Lock()
	defer h.installMu.Unlock()
	if err := os.MkdirAll(h.cfg.ModulesDir, 0o700); err != nil {
		return Summary{}, &core.Error{Kind: core.KindUnavailable, Message: "cannot create the modules directory", Err: err}
	}
	tmp, err := os.CreateTemp(h.cfg.ModulesDir, "."+m.Name+"-*.tmp")
	if err != nil {
		return Summary{}, &core.Error{Kind: core.KindUnavailable, Message: "cannot write the module file", Err: err}
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(bin)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Summary{}, &core.Error{Kind: core.KindUnavailable, Message: "cannot write the module file", Err: err}
	}
	// Pin before the file appears under its name: a crash in between
	// leaves a pin without a matching file, which is refused at load.
	oldSum, oldManifest, oldErr := h.cfg.Pins.ModulePin(ctx, m.Name)
	if err := h.cfg.Pins.PutModulePin(ctx, m.Name, sum.SHA256, mjson); err != nil {
		return Summary{}, err
	}
	if err := os.Rename(tmp.Name(), h.modulePath(m.Name)); err != nil {
		if oldErr == nil {
			_ = h.cfg.Pins.PutModulePin(ctx, m.Name, oldSum, oldManifest)
		} else {
			_ = h.cfg.Pins.DeleteModulePin(ctx, m.Name)
		}
		return Summary{}, &core.Error{Kind: core.KindUnavailable, Message: "cannot write the module file", Err: err}
	}
	h.log.Info("provider module installed", "module", m.Name, "version", m.Version, "sha256", sum.SHA256, "hosts", sum.Hosts)
	return sum, nil
}

func (h *Host) nameFree(name string) error {
	if slices.Contains(h.cfg.ReservedNames, name) {
		return core.Errorf(core.KindConflict, "%q is the name of a built-in provider; a module cannot take it", name)
	}
	h.mu.Lock()
	_, builtin := h.embedded[name]
	h.mu.Unlock()
	if builtin {
		return core.Errorf(core.KindConflict, "%q is the name of a first-party module built into companion; a module cannot take it", name)
	}
	return nil
}

// Module is one entry of Installed.
type Module struct {
	Summary
	// Status is "ok", "changed" (the file no longer matches its pin; it
	// will not be loaded), "missing" (no file) or "invalid".
	Status string `json:"status"`
	// Problem explains a Status other than "ok".
	Problem string `json:"problem,omitempty"`
	// Loaded is true when the module is loaded in this host.
	Loaded bool `json:"loaded"`
}

// Installed lists the first-party modules, then the installed ones by
// name, checking each installed file against its pin.
func (h *Host) Installed(ctx context.Context) ([]Module, error) {
	var out []Module
	h.mu.Lock()
	for name, a := range h.embedded {
		_, loaded := h.adapters[name]
		out = append(out, Module{Summary: a.Summary(), Status: "ok", Loaded: loaded})
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if h.cfg.ModulesDir == "" || h.cfg.Pins == nil {
		return out, nil
	}
	names, err := h.cfg.Pins.ListModulePins(ctx)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		sum, mjson, err := h.cfg.Pins.ModulePin(ctx, name)
		if err != nil {
			return nil, err
		}
		mod := Module{Status: "ok"}
		if m, err := manifest.Parse(mjson); err == nil {
			mod.Summary = summarize(m, sum, false)
		} else {
			mod.Summary = Summary{Name: name, SHA256: sum}
			mod.Status, mod.Problem = "invalid", err.Error()
		}
		bin, err := os.ReadFile(h.modulePath(name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			mod.Status, mod.Problem = "missing", "the module file "+h.modulePath(name)+" is missing"
		case err != nil:
			mod.Status, mod.Problem = "missing", "the module file cannot be read: "+err.Error()
		case sha256Hex(bin) != sum:
			mod.Status, mod.Problem = "changed", fmt.Sprintf("the module file changed since it was installed (sha256 %s); it will not be loaded", sha256Hex(bin))
		}
		if a, ok := h.Adapter(name); ok && !a.builtin {
			mod.Loaded = true
		}
		out = append(out, mod)
	}
	return out, nil
}

// Remove unloads an installed module, forgets its pin and deletes its
// file. First-party modules cannot be removed.
func (h *Host) Remove(ctx context.Context, name string) error {
	if err := h.needInstallDirs(); err != nil {
		return err
	}
	h.installMu.Lock()
	defer h.installMu.Unlock()
	_, _, err := h.cfg.Pins.ModulePin(ctx, name)
	h.mu.Lock()
	_, builtin := h.embedded[name]
	h.mu.Unlock()
	if err != nil {
		if core.IsKind(err, core.KindNotFound) {
			if builtin {
				return core.Errorf(core.KindInvalid, "provider module %s is built into companion and cannot be removed", name)
			}
			return core.Errorf(core.KindNotFound, "provider module %q is not installed", name)
		}
		return err
	}
	if a, ok := h.Adapter(name); ok && !a.builtin {
		if err := a.close(ctx); err != nil {
			return err
		}
	}
	if err := h.cfg.Pins.DeleteModulePin(ctx, name); err != nil {
		return err
	}
	if err := os.Remove(h.modulePath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		h.log.Warn("provider module file not deleted", "module", name, "path", h.modulePath(name), "err", err)
	}
	h.log.Info("provider module removed", "module", name)
	return nil
}
