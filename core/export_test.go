package core

// LockForTest takes a workspace's lock as an action of this service
// would (on a shared store, its lease too), for tests that need a
// workspace busy at a chosen moment.
func (s *Service) LockForTest(id string) (unlock func(), ok bool) { return s.locks.tryLock(id) }
