package hostcall

import "sync"

// known remembers the credential values a module's calls were given, for
// every account, so what a module hands back is checked against all of
// them: instances are shared by accounts, and a module could keep an echo
// from one call and return it in a later one, even another account's. The
// values live in host memory only, for as long as the module is loaded.
type known struct {
	mu    sync.Mutex
	vals  map[string]string // account id + "\x00" + credential name -> value
	order []string          // keys, oldest first
	scrub *scrubber         // of every value; nil when out of date
}

// maxKnown bounds how many values are remembered; the oldest go first.
const maxKnown = 256

func (k *known) add(accountID, name, v string) {
	key := accountID + "\x00" + name
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.vals[key]; ok && old == v {
		return
	}
	if k.vals == nil {
		k.vals = map[string]string{}
	}
	if _, ok := k.vals[key]; !ok {
		k.order = append(k.order, key)
	}
	k.vals[key] = v
	for len(k.order) > maxKnown {
		delete(k.vals, k.order[0])
		k.order = k.order[1:]
	}
	k.scrub = nil
}

// scrubber returns a scrubber of every remembered value, nil if none.
func (k *known) scrubber() *scrubber {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.vals) == 0 {
		return nil
	}
	if k.scrub == nil {
		vals := make([]string, 0, len(k.vals))
		for _, v := range k.vals {
			vals = append(vals, v)
		}
		k.scrub = newScrubber(vals)
	}
	return k.scrub
}
