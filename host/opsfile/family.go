package opsfile

import (
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/crankmcp/crank/host/jsonpath"
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

	// Paths are the compiled queries of the fields above.
	Paths JobPaths `json:"-"`
}

// JobPaths are a job block's compiled queries, nil where it sets none.
type JobPaths struct {
	Done, Status, Progress, Error, Result *jsonpath.Path
	// StatusArguments and CancelArguments are the queries of the
	// argument templates, by argument.
	StatusArguments, CancelArguments map[string]*jsonpath.Path
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
		{"done_path", &j.DonePath, &j.Paths.Done}, {"status_path", &j.StatusPath, &j.Paths.Status},
		{"progress_path", &j.ProgressPath, &j.Paths.Progress}, {"error_path", &j.ErrorPath, &j.Paths.Error},
		{"result_path", &j.ResultPath, &j.Paths.Result},
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
	j.Paths.StatusArguments = argumentPaths(j.StatusArguments, "/job/status_arguments", fail)
	j.Paths.CancelArguments = argumentPaths(j.CancelArguments, "/job/cancel_arguments", fail)
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
			fail(ptr+"/"+pointer.Key(k), "%v", err)
			continue
		}
		paths[k] = p
	}
	return paths
}
