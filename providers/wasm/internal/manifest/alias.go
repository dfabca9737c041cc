// Package manifest is the server's name for the manifest format, which is
// defined in the SDK module (providers/wasm/sdk/manifest) so that packers
// outside this repository validate exactly as the host does. These
// aliases keep one import path for the host's packages.
package manifest

import (
	"io"
	"net/url"

	sdkmanifest "github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

type (
	Manifest     = sdkmanifest.Manifest
	Upstream     = sdkmanifest.Upstream
	Credential   = sdkmanifest.Credential
	ConfigField  = sdkmanifest.ConfigField
	Limits       = sdkmanifest.Limits
	Capabilities = sdkmanifest.Capabilities
	Clock        = sdkmanifest.Clock
	Error        = sdkmanifest.Error
)

const (
	ABIVersion = sdkmanifest.ABIVersion

	SessionKeyCompanion = sdkmanifest.SessionKeyCompanion
	SessionKeyProvider  = sdkmanifest.SessionKeyProvider

	MaxSize = sdkmanifest.MaxSize
	Section = sdkmanifest.Section

	MaxModuleBytes = sdkmanifest.MaxModuleBytes

	DefaultMemoryMiB       = sdkmanifest.DefaultMemoryMiB
	MinMemoryMiB           = sdkmanifest.MinMemoryMiB
	MaxMemoryMiB           = sdkmanifest.MaxMemoryMiB
	DefaultCallTimeoutMS   = sdkmanifest.DefaultCallTimeoutMS
	MinCallTimeoutMS       = sdkmanifest.MinCallTimeoutMS
	MaxCallTimeoutMS       = sdkmanifest.MaxCallTimeoutMS
	DefaultResponseBytes   = sdkmanifest.DefaultResponseBytes
	MinResponseBytes       = sdkmanifest.MinResponseBytes
	MaxResponseBytes       = sdkmanifest.MaxResponseBytes
	DefaultRequestsPerCall = sdkmanifest.DefaultRequestsPerCall
	MinRequestsPerCall     = sdkmanifest.MinRequestsPerCall
	MaxRequestsPerCall     = sdkmanifest.MaxRequestsPerCall

	ClockPaused     = sdkmanifest.ClockPaused
	ClockIdle       = sdkmanifest.ClockIdle
	ClockLosesBox   = sdkmanifest.ClockLosesBox
	ClockLosesFiles = sdkmanifest.ClockLosesFiles
)

// The functions call the SDK's; funcs, not vars, so nothing can swap them.

func Parse(data []byte) (*Manifest, error) { return sdkmanifest.Parse(data) }

func ParseBaseURL(raw string, allowHTTP bool) (*url.URL, error) {
	return sdkmanifest.ParseBaseURL(raw, allowHTTP)
}

func Origin(u *url.URL) string { return sdkmanifest.Origin(u) }

func CheckName(name string) error { return sdkmanifest.CheckName(name) }

func Pack(module, manifestJSON []byte) ([]byte, error) {
	return sdkmanifest.Pack(module, manifestJSON)
}

func Extract(module []byte) ([]byte, error) { return sdkmanifest.Extract(module) }

func ExtractAt(r io.ReaderAt, size int64) ([]byte, error) { return sdkmanifest.ExtractAt(r, size) }

func ParseOverride(raw string) (*url.URL, error) { return sdkmanifest.ParseOverride(raw) }

func LoopbackHost(host string) bool { return sdkmanifest.LoopbackHost(host) }

// ErrEndpointHost is the SDK's sentinel for an undeclared endpoint host.
var ErrEndpointHost = sdkmanifest.ErrEndpointHost
