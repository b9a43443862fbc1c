// Package catalog is the operations catalog as the host sees it: a named
// operations file kept in etcd (package store keeps its versions) that a
// crank handler serves beside or instead of its operations files.
//
//   - document.go: the document — entries as the operator wrote them,
//     parsed from YAML or JSON with every shape problem placed by a JSON
//     pointer and a line; Compile checks it as an operations file is
//     loaded (package host/opsfile).
//   - export.go: the document as an operations file in YAML (export).
//   - problems.go: the host's and adapters' load errors as problems
//     placed in a request body (JSON pointers fit for form fields).
//   - diff.go: what changed between two versions, operation by operation
//     and field by field.
//   - follow.go: the Follower, which keeps a handler serving the current
//     version: one watch per handler, a new host.Host per version (adapter
//     processes and MCP sessions stay), the previous version serving on
//     when a new one fails to load.
//
// It knows nothing of Caddy or HTTP: the Caddy module builds hosts and
// routes the admin API (package host/admin) to it.
package catalog
