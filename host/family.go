package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/window"
)

// Roles of the tools of a family.
const (
	RoleStart  = "start"
	RolePoll   = "poll"
	RoleStop   = "stop"
	RoleStatus = "status"
	RoleResult = "result"
	RoleCancel = "cancel"
)

var (
	streamSessionRoles = []string{RoleStart, RolePoll, RoleStop}
	jobRoles           = []string{RoleStart, RoleStatus, RoleResult, RoleCancel}
)

// Family is the tool family a session or async_job operation is published
// as: {name}_start, {name}_poll, {name}_stop for a session;
// {name}_start, {name}_status, {name}_result, {name}_cancel for a job.
type Family struct {
	// Names maps each role to its tool name: {operation}_{role} unless the
	// family block renames it.
	Names map[string]string
	// AgentScoped: a session or job is visible only to the agent that
	// started it (scope: agent, the default), not to its whole workspace.
	AgentScoped bool
	// Job is the async_job config; nil for a session.
	Job *JobConfig
}

// Roles returns the roles of the family, in publishing order.
func (f *Family) Roles() []string {
	if f.Job != nil {
		return jobRoles
	}
	return streamSessionRoles
}

// FamilyNames renames the tools of a session or async_job family (the
// entry's family block); a name left out is {operation}_{role}.
type FamilyNames struct {
	Start  string `json:"start_tool_name,omitempty" jsonschema:"The tool that starts a session or job."`
	Poll   string `json:"poll_tool_name,omitempty" jsonschema:"A session's: returns the items after a cursor."`
	Stop   string `json:"stop_tool_name,omitempty" jsonschema:"A session's: ends it."`
	Status string `json:"status_tool_name,omitempty" jsonschema:"A job's: its status and progress."`
	Result string `json:"result_tool_name,omitempty" jsonschema:"A job's: its outcome once ready."`
	Cancel string `json:"cancel_tool_name,omitempty" jsonschema:"A job's: cancels it wherever it runs."`
}

// byRole lists the names set, in role order.
func (n *FamilyNames) byRole() [][2]string {
	return [][2]string{{RoleStart, n.Start}, {RolePoll, n.Poll}, {RoleStop, n.Stop},
		{RoleStatus, n.Status}, {RoleResult, n.Result}, {RoleCancel, n.Cancel}}
}

// JobConfig is the job block of an async_job operation. Without
// status_operation the host runs the operation itself in the background
// (one request, or the window it collects) and keeps its result. With it,
// the operation only starts the upstream's own job: the host then polls
// status_operation, built from the start result, until done_path says it
// is done (upstream-native jobs: a 202 with a status URL, a SOAP ticket).
type JobConfig struct {
	RetentionMS     int64          `json:"retention_ms,omitempty" default:"3600000" minimum:"1" maximum:"604800000" jsonschema:"A finished job and its result stay readable this long, in ms."`
	StatusOperation string         `json:"status_operation,omitempty" jsonschema:"A unary operation of the same files that reports the upstream job's status; the host polls it until done_path."`
	StatusArguments map[string]any `json:"status_arguments,omitempty" jsonschema:"The status operation's arguments: a string starting with $ is an RFC 9535 JSONPath into the start result, anything else is sent as written."`
	PollIntervalMS  int64          `json:"poll_interval_ms,omitempty" default:"2000" minimum:"10" maximum:"600000" jsonschema:"With status_operation: the pause between status polls, in ms."`
	DonePath        string         `json:"done_path,omitempty" jsonschema:"Required with status_operation: true once the upstream job is done."`
	StatusPath      string         `json:"status_path,omitempty" jsonschema:"With status_operation: the upstream's status text, reported as progress."`
	ProgressPath    string         `json:"progress_path,omitempty" jsonschema:"With status_operation: the upstream's progress value, reported as progress."`
	ErrorPath       string         `json:"error_path,omitempty" jsonschema:"With status_operation: a non-empty value here, once done, fails the job with it."`
	ResultPath      string         `json:"result_path,omitempty" jsonschema:"With status_operation: the result inside the final status answer (by default the whole answer)."`
	CancelOperation string         `json:"cancel_operation,omitempty" jsonschema:"A unary operation that cancels the upstream job, called on cancel."`
	CancelArguments map[string]any `json:"cancel_arguments,omitempty" jsonschema:"The cancel operation's arguments, built like status_arguments."`

	done, status, progress, errPath, result *jsonpath.Path
	statusArgs, cancelArgs                  map[string]*jsonpath.Path
}

// Retention is how long a finished job stays readable.
func (j *JobConfig) Retention() time.Duration { return time.Duration(j.RetentionMS) * time.Millisecond }

// PollInterval is the pause between polls of the status operation.
func (j *JobConfig) PollInterval() time.Duration {
	return time.Duration(j.PollIntervalMS) * time.Millisecond
}

// familyDecl is the family part of an entry, decoded: has says whether
// the entry wrote the field at a pointer within it.
type familyDecl struct {
	mode  Mode
	name  string
	names FamilyNames
	job   JobConfig
	scope string
	has   func(ptr string) bool
}

// parseFamily checks the family, job and scope fields of one entry. It
// returns nil for a unary or window operation.
func parseFamily(d familyDecl, fail func(ptr, format string, args ...any)) *Family {
	if d.mode != ModeSession && d.mode != ModeAsyncJob {
		for _, b := range []string{"/family", "/job", "/scope"} {
			if d.has(b) {
				fail(b, "only applies to modes session and async_job (this operation is %s)", d.mode)
			}
		}
		return nil
	}
	f := &Family{Names: map[string]string{}, AgentScoped: d.scope != "workspace"}
	roles := streamSessionRoles
	if d.mode == ModeAsyncJob {
		roles = jobRoles
		f.Job = parseJob(d.job, d.has, fail)
	} else if d.has("/job") {
		fail("/job", "only applies to mode async_job (this operation is session)")
	}
	for _, rn := range d.names.byRole() {
		role, name := rn[0], rn[1]
		ptr := "/family/" + role + "_tool_name"
		switch {
		case name == "":
		case !slices.Contains(roles, role):
			fail(ptr, "not a tool of mode %s (its tools: %s)", d.mode, strings.Join(roles, ", "))
		case !toolNameRE.MatchString(name):
			fail(ptr, "must be 1-128 characters of A-Z a-z 0-9 _ . - (got %q)", name)
		default:
			f.Names[role] = name
		}
	}
	for _, role := range roles {
		if name := d.name + "_" + role; f.Names[role] == "" && !toolNameRE.MatchString(name) {
			fail("/family", "the tool name %q is longer than 128 characters: set family.%s_tool_name", name, role)
		}
	}
	return f
}

func parseJob(j JobConfig, has func(string) bool, fail func(ptr, format string, args ...any)) *JobConfig {
	for _, pf := range []struct {
		key string
		dst *string
		out **jsonpath.Path
	}{
		{"done_path", &j.DonePath, &j.done}, {"status_path", &j.StatusPath, &j.status},
		{"progress_path", &j.ProgressPath, &j.progress}, {"error_path", &j.ErrorPath, &j.errPath},
		{"result_path", &j.ResultPath, &j.result},
	} {
		if *pf.dst == "" {
			continue
		}
		if pf.key != "done_path" && j.StatusOperation == "" {
			fail("/job/"+pf.key, "only applies with job.status_operation (it reads the status answers)")
			continue
		}
		p, err := jsonpath.Compile(*pf.dst)
		if err != nil {
			fail("/job/"+pf.key, "%v", err)
			continue
		}
		*pf.out = p
	}
	j.statusArgs = argumentPaths(j.StatusArguments, "/job/status_arguments", fail)
	j.cancelArgs = argumentPaths(j.CancelArguments, "/job/cancel_arguments", fail)
	switch {
	case j.StatusOperation == "":
		for _, k := range []string{"status_arguments", "poll_interval_ms", "done_path"} {
			if has("/job/" + k) {
				fail("/job/"+k, "only applies with job.status_operation (the upstream's own job status)")
			}
		}
	case j.DonePath == "":
		fail("/job/done_path", "is required with status_operation: the JSONPath that is true once the upstream job is done, e.g. $.done")
	}
	if has("/job/cancel_arguments") && j.CancelOperation == "" {
		fail("/job/cancel_arguments", "only applies with job.cancel_operation")
	}
	return &j
}

// argumentPaths compiles the JSONPath values of an arguments template
// (at ptr in the entry).
func argumentPaths(tmpl map[string]any, ptr string, fail func(ptr, format string, args ...any)) map[string]*jsonpath.Path {
	if tmpl == nil {
		return nil
	}
	paths := map[string]*jsonpath.Path{}
	for k, v := range tmpl {
		s, ok := v.(string)
		if !ok || !strings.HasPrefix(s, "$") {
			continue
		}
		p, err := jsonpath.Compile(s)
		if err != nil {
			fail(ptr+"/"+PointerKey(k), "%v", err)
			continue
		}
		paths[k] = p
	}
	return paths
}

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
		if !toolNameRE.MatchString(name) {
			return nil, fmt.Errorf("the %s tool name %q is longer than 128 characters: set family.%s_tool_name", role, name, role)
		}
		f.Names[role] = name
	}
	x.Family = &f
	var out []*boundOp
	for _, role := range f.Roles() {
		op := *x.Operation
		op.Name, op.Role = f.Names[role], role
		op.OutputSchema = familyOutputSchema(x.Operation, role)
		op.Description = familyDescription(x.Operation, role)
		op.Annotations = familyAnnotations(x.Operation, role)
		in := familyInputSchema(x.Operation, role)
		if in != nil {
			raw, resolved, err := compileInputSchema(in)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %v", op.Name, err)
			}
			op.InputSchema, op.input = raw, resolved
		}
		out = append(out, &boundOp{Operation: &op, sup: x.sup, call: x.call, base: x})
	}
	return out, nil
}

func familyInputSchema(op *Operation, role string) json.RawMessage {
	idArg := "job_id"
	if op.Mode == ModeSession {
		idArg = "session_id"
	}
	props := map[string]any{idArg: map[string]any{"type": "string", "minLength": 1,
		"description": fmt.Sprintf("The %s the %s tool returned.", idArg, op.Family.Names[RoleStart])}}
	switch role {
	case RoleStart:
		return nil // the operation's own arguments
	case RolePoll:
		props["cursor"] = map[string]any{"type": "string",
			"description": "The cursor the previous poll returned, unchanged (no other is taken): acknowledges its items and returns the next ones. Omit on the first poll. Repeating a cursor returns the same items."}
		props["max_items"] = map[string]any{"type": "integer", "minimum": 1, "maximum": op.Execution.Limits.MaxItems,
			"description": "At most this many items in this answer (default: all buffered, up to the session's buffer)."}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": []string{idArg}, "additionalProperties": false})
	return b
}

func familyDescription(op *Operation, role string) string {
	n := op.Family.Names
	if op.Mode == ModeSession {
		l := op.Execution.Limits
		switch role {
		case RoleStart:
			return fmt.Sprintf("%s\n\nStarts a session that follows the upstream in the background and returns its session_id. "+
				"Read what arrived with %s (repeatedly), end it with %s. The session ends by itself %s after the last poll, and at the latest %s after it started.",
				op.Description, n[RolePoll], n[RoleStop], l.Idle(), l.Lifetime())
		case RolePoll:
			return fmt.Sprintf("Returns the items that arrived in a session started with %s, after the given cursor, with has_more "+
				"(more are buffered now) and status (active while it is open). Pass the returned cursor to the next poll. Session of: %s",
				n[RoleStart], firstLine(op.Description))
		default:
			return fmt.Sprintf("Stops a session started with %s and releases its upstream. Items already buffered can still be polled for a short while. Session of: %s",
				n[RoleStart], firstLine(op.Description))
		}
	}
	switch role {
	case RoleStart:
		return fmt.Sprintf("%s\n\nRuns as a background job and returns its job_id at once. Follow it with %s, fetch the outcome with %s, stop it with %s.",
			op.Description, n[RoleStatus], n[RoleResult], n[RoleCancel])
	case RoleStatus:
		return fmt.Sprintf("Returns the status (running, succeeded, failed, canceled, ...) and progress of a job started with %s. Job of: %s",
			n[RoleStart], firstLine(op.Description))
	case RoleResult:
		return fmt.Sprintf("Returns the result of a job started with %s once it is ready (ready: true); before that it says it is not ready yet. Job of: %s",
			n[RoleStart], firstLine(op.Description))
	default:
		return fmt.Sprintf("Cancels a job started with %s; the running upstream operation is cancelled too. Job of: %s",
			n[RoleStart], firstLine(op.Description))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func familyAnnotations(op *Operation, role string) *Annotations {
	t, f := true, false
	switch role {
	case RoleStart:
		return op.Annotations
	case RoleStatus, RoleResult:
		return &Annotations{ReadOnly: &t, Idempotent: &t, OpenWorld: &f}
	case RolePoll:
		return &Annotations{ReadOnly: &f, Destructive: &f, Idempotent: &t, OpenWorld: &f}
	case RoleStop:
		return &Annotations{ReadOnly: &f, Destructive: &f, Idempotent: &t, OpenWorld: &f}
	default: // cancel
		return &Annotations{ReadOnly: &f, Destructive: &t, Idempotent: &t, OpenWorld: &t}
	}
}

func familyOutputSchema(op *Operation, role string) json.RawMessage {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	dateTime := map[string]any{"type": "string", "format": "date-time"}
	var props map[string]any
	var required []string
	if op.Mode == ModeSession {
		status := map[string]any{"type": "string", "enum": []string{"active", "stopping", "stopped", "completed", "failed"},
			"description": "active: open, items may still arrive; stopping: a stop is under way; stopped, completed (the upstream ended) and failed are final."}
		switch role {
		case RoleStart:
			props = map[string]any{"session_id": str, "status": status, "expires_at": dateTime,
				"idle_timeout_ms": integer, "max_session_lifetime_ms": integer, "poll_tool": str, "stop_tool": str}
			required = []string{"session_id", "status"}
		case RolePoll:
			props = map[string]any{"session_id": str, "status": status,
				"items":      map[string]any{"type": "array", "description": "Items that arrived after the cursor, oldest first."},
				"cursor":     map[string]any{"type": "string", "description": "Pass it to the next poll."},
				"has_more":   map[string]any{"type": "boolean", "description": "More items are buffered now: poll again at once."},
				"gaps":       map[string]any{"type": "integer", "description": "Points where the session may have missed items (skipped or unreadable items, reconnects)."},
				"error":      map[string]any{"description": "Why the session failed, when it did."},
				"expires_at": dateTime, "end_reason": str}
			required = []string{"session_id", "status", "items", "cursor", "has_more"}
		default:
			props = map[string]any{"session_id": str, "status": status, "buffered_items": integer}
			required = []string{"session_id", "status"}
		}
	} else {
		status := map[string]any{"type": "string", "enum": []string{"queued", "running", "canceling", "succeeded", "failed", "canceled"},
			"description": "succeeded, failed and canceled are final."}
		switch role {
		case RoleStart:
			props = map[string]any{"job_id": str, "status": status, "status_tool": str, "result_tool": str, "cancel_tool": str}
			required = []string{"job_id", "status"}
		case RoleStatus:
			props = map[string]any{"job_id": str, "status": status, "progress": map[string]any{"description": "The job's latest progress."},
				"created_at": dateTime, "updated_at": dateTime, "finished_at": dateTime, "expires_at": dateTime,
				"error": map[string]any{"description": "Why the job failed, when it did."}}
			required = []string{"job_id", "status"}
		case RoleResult:
			result := map[string]any{"description": "The operation's result (its structured content)."}
			var rs json.RawMessage
			if op.Execution != nil {
				rs = window.OutputSchema(op.Execution)
			} else if len(op.OutputSchema) > 0 {
				rs = op.OutputSchema
			}
			var s map[string]any
			if json.Unmarshal(rs, &s) == nil && s != nil {
				result = s
			}
			props = map[string]any{"job_id": str, "status": status,
				"ready":  map[string]any{"type": "boolean", "description": "The job finished and its outcome is here."},
				"result": result, "text": str,
				"error": map[string]any{"description": "Why the job failed, when it did."}}
			required = []string{"job_id", "status", "ready"}
		default:
			props = map[string]any{"job_id": str, "status": status}
			required = []string{"job_id", "status"}
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	return b
}
