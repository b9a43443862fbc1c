package opsfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	"github.com/crankmcp/crank/plugins/sdk"
)

// windowed are the modes an execution block applies to.
const windowed = `"x-crank-modes": ["window", "session", "async_job"]`

// entryKeywords state what OperationDecl's Go types and tags cannot:
// titles of its blocks (the console's legends), the modes a block or
// field applies to (x-crank-modes: the console hides it in others, the
// reference names them), and the patterns of tool names.
var entryKeywords = map[string]string{
	"":                               `{"description": "One operation of an operations file or catalog: a tool, or a family of tools (mode session or async_job)."}`,
	"name":                           `{"pattern": "^[A-Za-z0-9_.-]{1,128}$"}`,
	"transport_behavior":             `{` + windowed + `}`,
	"limits":                         `{"title": "Collection limits", ` + windowed + `}`,
	"limits.idle_timeout_ms":         `{"x-crank-modes": ["window", "session"]}`,
	"limits.max_session_lifetime_ms": `{"x-crank-modes": ["session"]}`,
	"limits.window_duration_ms":      `{"x-crank-modes": ["window", "async_job"]}`,
	"aggregation":                    `{"title": "Aggregation", ` + windowed + `}`,
	"safety":                         `{"title": "Safety", ` + windowed + `}`,
	"family":                         `{"title": "Tool family", "x-crank-modes": ["session", "async_job"]}`,
	"family.start_tool_name":         `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["session", "async_job"]}`,
	"family.poll_tool_name":          `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["session"]}`,
	"family.stop_tool_name":          `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["session"]}`,
	"family.status_tool_name":        `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["async_job"]}`,
	"family.result_tool_name":        `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["async_job"]}`,
	"family.cancel_tool_name":        `{"pattern": "^[A-Za-z0-9_.-]{1,128}$", "x-crank-modes": ["async_job"]}`,
	"job":                            `{"title": "Job", "x-crank-modes": ["async_job"]}`,
	"scope":                          `{"x-crank-modes": ["session", "async_job"]}`,
	"annotations":                    `{"title": "Annotations"}`,
	"upstream_auth":                  `{"title": "Upstream credentials"}`,
	"input_schema":                   `{"type": "object"}`,
	"output_schema":                  `{"type": "object"}`,
	"config":                         `{"type": "object"}`,
}

var entrySchema = sync.OnceValues(func() (json.RawMessage, error) {
	return sdk.SchemaFor[OperationDecl]("Operation entry", entryKeywords)
})

// OperationSchema is the JSON Schema (2020-12) of an operation entry,
// derived from OperationDecl's tags: what the admin API publishes (GET
// /crank/schema/operation), the console's operation form is built from
// and the reference in docs/reference/operation-entry.md is generated from.
func OperationSchema() json.RawMessage {
	s, err := entrySchema()
	if err != nil {
		panic("opsfile: the operation entry's schema: " + err.Error()) // OperationDecl's tags are wrong; a test sees it
	}
	return s
}

// EntryFields are the fields of an entry in the order OperationDecl
// declares them (the export's).
func EntryFields() []string {
	var out []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[OperationDecl]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.Anonymous && f.IsExported() && name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
