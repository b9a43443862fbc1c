package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The internal task header: the SDK drops params.task when it parses a
// tools/call, and refuses tasks/* on a session restored from the store, so
// ServeHTTP hands both to the tasks middleware (tasks.go) in a request
// header before the SDK reads the body.

// taskHeader is the internal request header through which markTasks hands
// a taskEnvelope to the middleware.
const taskHeader = internalHeaderPrefix + "Task"

// taskEnvelope is what taskHeader carries: params.task of a tools/call, or
// a tunnelled tasks/* request.
type taskEnvelope struct {
	Task   json.RawMessage `json:"task,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// envelope returns the taskEnvelope of a request, if it has one.
func envelope(extra *mcp.RequestExtra) (taskEnvelope, bool) {
	var env taskEnvelope
	if extra == nil || extra.Header == nil {
		return env, false
	}
	raw := extra.Header.Get(taskHeader)
	return env, raw != "" && json.Unmarshal([]byte(raw), &env) == nil
}

// markTasks prepares a POST for the middleware, before the SDK reads it:
// params.task of a tools/call goes into taskHeader; a tasks/* request for a
// session the SDK's handler does not hold becomes a ping with the request
// in taskHeader. The body is handed on unchanged but for that.
func (ep *Endpoint) markTasks(r *http.Request, p *peeked) {
	if p.body == nil || r.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion || !bytes.Contains(p.body, []byte(`"task`)) {
		return
	}
	msg := p.message()
	var env taskEnvelope
	switch msg.method {
	case "tools/call":
		if env.Task = msg.task; env.Task == nil {
			return
		}
	case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
		id := r.Header.Get(sessionIDHeader)
		if !ep.transport.stateful || id == "" || len(msg.id) == 0 || ep.sdkHolds(id) {
			return
		}
		env.Method, env.Params = msg.method, msg.params
		ping := pingWithID(msg.id)
		r.Body = struct {
			io.Reader
			io.Closer
		}{bytes.NewReader(ping), r.Body}
		r.ContentLength = int64(len(ping))
	default:
		return
	}
	raw, _ := json.Marshal(env)
	r.Header.Set(taskHeader, string(raw))
}

// sdkHolds reports whether the SDK's handler holds session id (it created
// the session here and it is open).
func (ep *Endpoint) sdkHolds(id string) bool {
	ls := ep.replicas.get(id)
	return ls != nil && ls.transport == nil && !ls.closed.Load()
}
