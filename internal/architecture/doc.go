// Package architecture holds the house's dependency rules as a test
// (architecture_test.go): which packages may reach an AWS service SDK, an
// adapter or the domain, checked with `go list -deps` on every package of
// the module. What breaks a rule today is listed, each line once, in
// exceptions.txt; every step of the move to the target layout deletes
// lines from it, and the list empty is the layout done. docs/architecture.md
// states the rules.
package architecture
