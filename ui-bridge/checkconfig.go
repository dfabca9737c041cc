package uibridge

import "net/http"

// CheckConfig reports what New would refuse in cfg's route-gate settings
// (hosts, origins, authentication) without building anything, so that a
// program can refuse bad flags before it announces it is ready and builds
// the rest of the bridge later.
func CheckConfig(cfg Config) error {
	_, err := newGate(cfg, http.NotFoundHandler())
	return err
}
