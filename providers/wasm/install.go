package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/sandbox"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Inspect validates a module without installing it and without running or
// compiling any of it: its manifest, its binary against the limits ABI.md
// documents (tables, functions, locals, bodies, data, imports, exports,
// size), its imports and exports against the ABI, and its capabilities
// against its exports. Nothing is kept: anyone may inspect modules they
// never install.
func (h *Host) Inspect(ctx context.Context, bin []byte) (Summary, error) {
	m, _, err := parseModule(bin)
	if err != nil {
		return Summary{}, err
	}
	if _, err := check(m, bin, "inspect"); err != nil {
		return Summary{}, err
	}
	return summarize(m, sha256Hex(bin), false), nil
}

// check is the part of Inspect that reads the binary.
func check(m *manifest.Manifest, bin []byte, op string) (*sandbox.Checked, error) {
	chk, err := sandbox.Check(bin, m.Limits)
	if err != nil {
		return nil, refused(m.Name, op, "", err)
	}
	if err := chk.CheckCapabilities(core.Capabilities(m.Capabilities)); err != nil {
		return nil, refused(m.Name, op, "capabilities", err)
	}
	return chk, nil
}

// admit is what Install adds to Inspect: the module is compiled (into the
// host's cache, so that loading it afterwards is quick) and run in the
// same bounded sandbox as any call, to check the ABI version it reports
// and that its describe agrees with its manifest.
func (h *Host) admit(ctx context.Context, m *manifest.Manifest, bin []byte) error {
	mod, err := h.compile(ctx, m.Name, m, bin, &LoadInfo{}, false)
	if err != nil {
		return refused(m.Name, "install", "", err)
	}
	defer mod.Close(context.Background())
	if err := mod.Warm(ctx, m.ABIVersion); err != nil {
		field := ""
		if strings.Contains(err.Error(), "ABI version") {
			field = "abi_version"
		}
		return refused(m.Name, wire.ExportABIVersion, field, err)
	}
	policy := hostcall.NewPolicy(m, h.cfg.Credentials, h.transports)
	d, err := callDescribe(ctx, mod, m, policy)
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			err = errors.New(ce.Message)
		}
		return refused(m.Name, wire.OpDescribe, "", err)
	}
	if field, err := describeMismatch(m, d); err != nil {
		return refused(m.Name, wire.OpDescribe, field, err)
	}
	return nil
}

// Install validates a module (as Inspect does), stores it as
// <ModulesDir>/<name>.wasm (in the shared store with its pin, when Pins
// is a ModuleStore) and pins its SHA-256 and manifest. A module of
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
	if _, err := check(m, bin, "install"); err != nil {
		return Summary{}, err
	}
	if err := h.admit(ctx, m, bin); err != nil {
		return Summary{}, err
	}
	sum := summarize(m, sha256Hex(bin), false)
	h.installMu.Lock()
	defer h.installMu.Unlock()
	if h.shared != nil {
		if err := h.shared.PutModule(ctx, m.Name, sum.SHA256, mjson, bin); err != nil {
			return Summary{}, err
		}
		// A file left from before the bytes were kept in the store is
		// another module's now.
		if err := os.Remove(h.modulePath(m.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.log.Warn("old provider module file not deleted", "module", m.Name, "path", h.modulePath(m.Name), "err", err)
		}
		delete(h.syncFailed, m.Name)
		h.log.Info("provider module installed", "module", m.Name, "version", m.Version, "sha256", sum.SHA256, "hosts", sum.Hosts, "shared", true)
		return sum, nil
	}
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
		mod.Status, mod.Problem = h.installedStatus(ctx, name, sum, mod.Status, mod.Problem)
		if a, ok := h.Adapter(name); ok && !a.builtin {
			mod.Loaded = true
		}
		out = append(out, mod)
	}
	return out, nil
}

// installedStatus checks the installed bytes of module name against its
// pinned hash sum; status and problem are kept when they are fine.
func (h *Host) installedStatus(ctx context.Context, name, sum, status, problem string) (string, string) {
	if h.shared != nil {
		s, bin, err := h.shared.ModuleBytes(ctx, name)
		switch {
		case err != nil:
			return "missing", "the module's bytes cannot be read from the database: " + err.Error()
		case bin != nil && (s != sum || sha256Hex(bin) != s):
			return "changed", fmt.Sprintf("the module's bytes in the database do not match its pin (sha256 %s); it will not be loaded", sha256Hex(bin))
		case bin != nil:
			return status, problem
		}
		// A pin from before the bytes were kept in the database: its
		// file, on the host that has it.
	}
	bin, err := os.ReadFile(h.modulePath(name))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if h.shared != nil {
			return "missing", "the module was installed before modules were kept in the database, and this host does not have its file " + h.modulePath(name) + "; reinstall it"
		}
		return "missing", "the module file " + h.modulePath(name) + " is missing"
	case err != nil:
		return "missing", "the module file cannot be read: " + err.Error()
	case sha256Hex(bin) != sum:
		return "changed", fmt.Sprintf("the module file changed since it was installed (sha256 %s); it will not be loaded", sha256Hex(bin))
	}
	return status, problem
}

// Remove unloads an installed module, forgets its pin (and, with a shared
// store, its bytes: the other hosts unload it at their next Sync) and
// deletes its file. First-party modules cannot be removed.
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
