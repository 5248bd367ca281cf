// Package houserules holds the tests that keep the repository to its house
// rules: every function under 100 lines and every file under 600; every
// import running down the layers (layers_test.go); the drivers of tables —
// the server, the Job, the client, the programs and the benchmark —
// reaching them through the engine alone, importing none of its parts
// (doors_test.go); and README.md's Go examples type-checking against the
// module (readme_test.go). It has no code of its own outside its tests;
// `go test ./...` runs them.
package houserules
