// Package docscheck holds the tests that the docs agree with the code:
// every `pkg.Name`, `Type.Member` and bare exported name in backticks in
// README.md and docs/ is declared by a package of the module, and every
// generated benchmark table (between <!-- bench:begin --> and
// <!-- bench:end --> markers) is what package bench renders from the run
// record its marker names. It has no code outside its tests.
package docscheck
