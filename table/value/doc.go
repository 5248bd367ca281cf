// Package value holds the scalar values that filters compare columns with
// and that a fragment's statistics record: Int, Uint, Float, String, Bytes
// and Bool, and the order Compare gives them. It is the bottom of a table's
// packages and imports nothing of Strata.
package value
