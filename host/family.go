package host

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/opsfile"
)

// buildArguments fills an arguments template from a result document.
func buildArguments(tmpl map[string]any, paths map[string]*jsonpath.Path, doc any) (json.RawMessage, error) {
	out := make(map[string]any, len(tmpl))
	for k, v := range tmpl {
		p, ok := paths[k]
		if !ok {
			out[k] = v
			continue
		}
		val, found := jsonpath.First(p, doc)
		if !found {
			return nil, fmt.Errorf("argument %q: %s matched nothing in the start result", k, v)
		}
		out[k] = val
	}
	return json.Marshal(out)
}

// familyTools turns a bound session or async_job operation into the tools
// of its family. Each tool shares the operation's adapter binding; start
// takes the operation's arguments, the others the session or job ID.
func familyTools(x *boundOp) ([]*boundOp, error) {
	f := *x.Family
	f.Names = map[string]string{}
	for _, role := range f.Roles() {
		name := x.Family.Names[role]
		if name == "" {
			name = x.Name + "_" + role
		}
		if !opsfile.ValidToolName(name) {
			return nil, fmt.Errorf("the %s tool name %q is longer than 128 characters: set family.%s_tool_name", role, name, role)
		}
		f.Names[role] = name
	}
	x.Family = &f
	var out []*boundOp
	for _, role := range f.Roles() {
		op := *x.Operation
		op.Name, op.Role = f.Names[role], role
		if op.Title != "" {
			op.Title += " (" + role + ")" // each tool of the family its own title
		}
		op.OutputSchema = outputSchema(x.Operation, role) // outputschema.go
		op.Description = familyDescription(x.Operation, role)
		op.Annotations = familyAnnotations(x.Operation, role)
		if in := familyInputSchema(x.Operation, role); in != nil {
			if err := op.SetInputSchema(in); err != nil {
				return nil, fmt.Errorf("tool %q: %v", op.Name, err)
			}
		}
		out = append(out, &boundOp{Operation: &op, sup: x.sup, call: x.call, base: x})
	}
	return out, nil
}

func familyInputSchema(op *opsfile.Operation, role string) json.RawMessage {
	idArg := "job_id"
	if op.Mode == opsfile.ModeSession {
		idArg = "session_id"
	}
	props := map[string]any{idArg: map[string]any{"type": "string", "minLength": 1,
		"description": fmt.Sprintf("The %s the %s tool returned.", idArg, op.Family.Names[opsfile.RoleStart])}}
	switch role {
	case opsfile.RoleStart:
		return nil // the operation's own arguments
	case opsfile.RolePoll:
		props["cursor"] = map[string]any{"type": "string",
			"description": "The cursor the previous poll returned, unchanged (no other is taken): acknowledges its items and returns the next ones. Omit on the first poll. Repeating a cursor returns the same items."}
		props["max_items"] = map[string]any{"type": "integer", "minimum": 1, "maximum": op.Execution.Limits.MaxItems,
			"description": "At most this many items in this answer (default: all buffered, up to the session's buffer)."}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": []string{idArg}, "additionalProperties": false})
	return b
}

func familyDescription(op *opsfile.Operation, role string) string {
	n := op.Family.Names
	if op.Mode == opsfile.ModeSession {
		l := op.Execution.Limits
		switch role {
		case opsfile.RoleStart:
			return fmt.Sprintf("%s\n\nStarts a session that follows the upstream in the background and returns its session_id. "+
				"Read what arrived with %s (repeatedly), end it with %s. The session ends by itself %s after the last poll, and at the latest %s after it started.",
				op.Description, n[opsfile.RolePoll], n[opsfile.RoleStop], l.Idle(), l.Lifetime())
		case opsfile.RolePoll:
			return fmt.Sprintf("Returns the items that arrived in a session started with %s, after the given cursor, with has_more "+
				"(more are buffered now) and status (active while it is open). Pass the returned cursor to the next poll. Session of: %s",
				n[opsfile.RoleStart], firstLine(op.Description))
		default:
			return fmt.Sprintf("Stops a session started with %s and releases its upstream. Items already buffered can still be polled for a short while. Session of: %s",
				n[opsfile.RoleStart], firstLine(op.Description))
		}
	}
	switch role {
	case opsfile.RoleStart:
		return fmt.Sprintf("%s\n\nRuns as a background job and returns its job_id at once. Follow it with %s, fetch the outcome with %s, stop it with %s.",
			op.Description, n[opsfile.RoleStatus], n[opsfile.RoleResult], n[opsfile.RoleCancel])
	case opsfile.RoleStatus:
		return fmt.Sprintf("Returns the status (running, succeeded, failed, canceled, ...) and progress of a job started with %s. Job of: %s",
			n[opsfile.RoleStart], firstLine(op.Description))
	case opsfile.RoleResult:
		return fmt.Sprintf("Returns the result of a job started with %s once it is ready (ready: true); before that it says it is not ready yet. Job of: %s",
			n[opsfile.RoleStart], firstLine(op.Description))
	default:
		return fmt.Sprintf("Cancels a job started with %s; the running upstream operation is cancelled too. Job of: %s",
			n[opsfile.RoleStart], firstLine(op.Description))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func familyAnnotations(op *opsfile.Operation, role string) *opsfile.Annotations {
	t, f := true, false
	switch role {
	case opsfile.RoleStart:
		return op.Annotations
	case opsfile.RoleStatus, opsfile.RoleResult:
		return &opsfile.Annotations{ReadOnly: &t, Idempotent: &t, OpenWorld: &f}
	case opsfile.RolePoll:
		return &opsfile.Annotations{ReadOnly: &f, Destructive: &f, Idempotent: &t, OpenWorld: &f}
	case opsfile.RoleStop:
		return &opsfile.Annotations{ReadOnly: &f, Destructive: &f, Idempotent: &t, OpenWorld: &f}
	default: // cancel
		return &opsfile.Annotations{ReadOnly: &f, Destructive: &t, Idempotent: &t, OpenWorld: &t}
	}
}
