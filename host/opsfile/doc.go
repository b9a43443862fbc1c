// Package opsfile is the operations-file model: what a Crank handler's
// operations file (YAML or JSON), or a catalog's document compiled as
// one, says, checked and loaded. An entry is defined once, by
// [OperationDecl]: its tags state every default, bound and allowed value,
// from which come the decoding (every unknown field, wrong type and value
// out of bounds reported at load, at once, naming the operation and the
// field by JSON pointer), the schema [OperationSchema] publishes and the
// reference table in docs/reference/operation-entry.md; [Parse] and [LoadFile] check what one
// field cannot say alone (modes, presets, a window's blocks into a
// window.Config, a job's paths, schemas, upstream_auth), expand
// placeholders (their values are the secrets the runtime redacts) and
// return a [File] of validated [Operation]s, or every [Problem] at once,
// placed by pointer and line (the one problem type and the one YAML line
// finder of the file path, the catalog and the admin API). [Merge] joins
// several files; [CatalogAllow] is what a catalog's entries may reach.
//
// It neither runs adapters nor serves calls: the runtime (package host)
// imports it, binds each Operation to its adapter and expands it. A
// loaded Operation's exported fields are the entry as loaded; what the
// runtime needs of it beyond them is read through methods, so that it
// cannot drift from them: the compiled input schema (Input, which only
// SetInputSchema changes, together with InputSchema, when the runtime
// derives a tool's schema), where the entry is written (Problem) and,
// for a catalog's entry, what it may reach (CheckReach, DerivedReach,
// and Derived for the tools an adapter derives from it). The runtime
// keeps no copy of that state and cannot set it by hand.
package opsfile
