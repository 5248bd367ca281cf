//go:build !strata_plant

package plant

// Enabled is a build with the switches.
const Enabled = false

// On reports whether the defect is planted: never, in this build.
func On(string) bool { return false }
