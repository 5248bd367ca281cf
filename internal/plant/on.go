//go:build strata_plant

package plant

import "sync"

// Enabled is a build with the switches.
const Enabled = true

var (
	mu sync.RWMutex
	on = map[string]bool{}
)

// On reports whether the defect is planted.
func On(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return on[name]
}

// Set plants (or removes) a defect; it panics on a name that is not one,
// so a test cannot switch on nothing.
func Set(name string, v bool) {
	for _, d := range All {
		if d == name {
			mu.Lock()
			on[name] = v
			mu.Unlock()
			return
		}
	}
	panic("plant: no defect " + name)
}
