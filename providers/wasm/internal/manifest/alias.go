// Package manifest is the server's name for the manifest format, which is
// defined in the SDK module (providers/wasm/sdk/manifest) so that packers
// outside this repository validate exactly as the host does. These
// aliases keep one import path for the host's packages.
package manifest

import sdkmanifest "github.com/canvasapp/companion/providers/wasm/sdk/manifest"

type (
	Manifest     = sdkmanifest.Manifest
	Upstream     = sdkmanifest.Upstream
	Credential   = sdkmanifest.Credential
	ConfigField  = sdkmanifest.ConfigField
	Limits       = sdkmanifest.Limits
	Capabilities = sdkmanifest.Capabilities
	Error        = sdkmanifest.Error
)

const (
	ABIVersion = sdkmanifest.ABIVersion
	MaxSize    = sdkmanifest.MaxSize
	Section    = sdkmanifest.Section

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
)

var (
	Parse         = sdkmanifest.Parse
	ParseBaseURL  = sdkmanifest.ParseBaseURL
	Origin        = sdkmanifest.Origin
	CheckName     = sdkmanifest.CheckName
	Pack          = sdkmanifest.Pack
	Extract       = sdkmanifest.Extract
	ParseOverride = sdkmanifest.ParseOverride
	LoopbackHost  = sdkmanifest.LoopbackHost
)
