// Package doccheck holds the documentation to the repository: every
// relative link of its Markdown files (README.md, docs/, the SDK's guide,
// …) reaches a file, and an anchor a heading of it by GitHub's rules
// (TestLinks); every repository path a document names in code reaches a
// file (TestPaths); and every `make` target a document names is one the
// Makefile has (TestMakeTargets). Tests only.
package doccheck
