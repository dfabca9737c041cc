package main

// startSeeded builds the binaries, seeds a data dir with n workspaces and
// starts companion on it with env added, warm (see startWarmEnv). It
// returns the binaries, the server (the caller stops it) and the server's
// GET /v1/workspaces answer.
func startSeeded(env []string, n int) (bins, *server, []byte, error) {
	b, err := buildBins()
	if err != nil {
		return b, nil, nil, err
	}
	dir, err := seededDir(n)
	if err != nil {
		return b, nil, nil, err
	}
	s, list, err := startWarmEnv(env, b.companion, dir)
	return b, s, list, err
}
