package core

// LockForTest takes a workspace's lock as an action of this service
// would (on a shared store, its lease too), for tests that need a
// workspace busy at a chosen moment.
func (s *Service) LockForTest(id string) (unlock func(), ok bool) { return s.locks.tryLock(id) }

// KnowClocksForTest records a provider's deletion clocks as a description
// of it would, without the background rederive that learning them starts,
// for tests that count every store call.
func (s *Service) KnowClocksForTest(info ProviderInfo) { s.clocks.learn(info.Name, info.Clocks) }
