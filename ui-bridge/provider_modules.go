package uibridge

import "context"

// ModuleFacts is what GET /v1/providers adds to a provider that is a Wasm
// module: the SHA-256 of its pinned bytes and the hosts its manifest
// declares. It is read from the module registry (the manifest and the
// pin), never by compiling the module.
type ModuleFacts struct {
	// SHA256 is the lower-case hex SHA-256 of the module file companion
	// loads (for installed modules, the one pinned at install).
	SHA256 string
	// Hosts are the origins (scheme://host:port) of the module's
	// upstreams, in manifest order.
	Hosts []string
	// EndpointHosts are the host patterns (name or *.domain) the
	// agent-server URLs it reports must match; nil when it reports none.
	EndpointHosts []string
}

// moduleFactsSource is implemented by a ModuleAdmin that can describe its
// loaded modules. It is optional: without it the provider list carries no
// module facts. ok is false for a name that is not a Wasm module (docker)
// or whose manifest could not be read.
type moduleFactsSource interface {
	ModuleFacts(ctx context.Context, name string) (facts ModuleFacts, ok bool)
}

// addModuleFacts fills in the module fields of each provider that is a
// Wasm module, when the server's ModuleAdmin can say.
func (s *Server) addModuleFacts(ctx context.Context, out []Provider) {
	src, ok := s.cfg.Modules.(moduleFactsSource)
	if !ok {
		return
	}
	for i := range out {
		f, ok := src.ModuleFacts(ctx, out[i].Name)
		if !ok {
			continue
		}
		out[i].SHA256 = f.SHA256
		out[i].Hosts = f.Hosts
		out[i].EndpointHosts = f.EndpointHosts
	}
}
