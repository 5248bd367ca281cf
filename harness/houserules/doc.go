// Package houserules holds the tests that keep the repository to its house
// rules: every function under 100 lines and every file under 600, and
// every import running down the layers (see layers_test.go). It has no
// code of its own outside its tests; `go test ./...` runs them.
package houserules
