// Package archtest holds docs/architecture/packages.md to the code: its package
// table's "may import" column against what `go list` says every package
// of the repository's modules imports (TestPackageTable). Tests only.
package archtest
