package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/plugins/sdk"
)

// toolExecution gives op, one tool expanded from entry, the mode, window
// config and item schema its adapter derived (Tool.mode, execution_json,
// item_schema_json), checked as an entry's are. The entry itself (self)
// keeps a window config its operator wrote; a derived tool's own config
// replaces its entry's. Problems name the tool and the field. A tool's
// execution_json is an ExecutionDecl: the execution part of an entry,
// without mode and preset (the tool's mode travels in Tool.mode; presets
// are the operator's).
func toolExecution(entry, op *opsfile.Operation, t *sdk.Tool, self bool, sup *Supervisor) error {
	mode := t.Mode
	raw := bytes.TrimSpace(t.Execution)
	item := bytes.TrimSpace(t.ItemSchema)
	if self && entry.Execution != nil || entry.Family != nil {
		// The operator's config wins: a window entry's own, and always a
		// session's or async_job's (its tools read the upstream the way
		// the entry says; a derived item schema still describes items).
		mode, raw = 0, nil
	}
	var problems []string
	fail := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	m := entry.Mode
	switch mode {
	case 0: // the entry's
	case sdk.ModeUnary:
		m = opsfile.ModeUnary
	case sdk.ModeWindow:
		m = opsfile.ModeWindow
	default:
		fail("/mode", "the adapter gave it mode %s; a derived tool is unary or window", mode)
	}
	if len(problems) == 0 && (m != entry.Mode || len(raw) > 0) {
		if m != entry.Mode && !sup.Description().Serves(sdkMode(m)) {
			fail("/mode", "adapter %q does not serve mode %q", entry.Adapter, m)
		}
		var ex *window.Config
		if len(problems) == 0 {
			ex = opsfile.ParseExecutionJSON(m, raw, fail)
		}
		if ex != nil && ex.TransportBehavior == window.ServerStream && !sup.Description().Capabilities.Stream {
			fail("/transport_behavior", "adapter %q cannot stream: use request_response to poll it", entry.Adapter)
		}
		op.Mode, op.Execution = m, ex
		if ex != nil {
			// The window bounds the call; the entry's timeout is for
			// its unary tools.
			op.Timeout = ex.Limits.Window() + opsfile.WindowGrace
		}
	}
	if len(problems) == 0 && op.Execution != nil && (len(item) > 0 || t.ResumesStream) {
		ex := *op.Execution
		ex.Resumes = t.ResumesStream
		if len(item) > 0 {
			ex.ItemSchema = lenientSchema(json.RawMessage(item), op.StrictOutput) // outputschema.go
			if err := opsfile.CheckOutputSchema(window.OutputSchema(&ex)); err != nil {
				fail("/item_schema", "the derived item schema is not usable: %v", err)
			}
		}
		op.Execution = &ex
	}
	if len(problems) > 0 {
		return fmt.Errorf("tool %q: %s", op.Name, strings.Join(problems, "; "))
	}
	return nil
}
