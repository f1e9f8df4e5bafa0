// Package docscheck holds the test that the Go identifiers the docs name
// exist: every `pkg.Name`, `Type.Member` and bare exported name in
// backticks in README.md and docs/ is declared by a package of the module.
// It has no code outside its test.
package docscheck
