package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Resuming an upstream task on another gateway replica.
//
// A task the adapter created for an async job's call (tasks.go) lives
// upstream, in the MCP session it was created on: over Streamable HTTP
// another adapter process can follow it on, sending tasks/get,
// tasks/result and tasks/cancel with that session's Mcp-Session-Id (the
// upstream's tasks belong to their session). So once the task exists the
// call reports its resume state (sdk.ReportResume): the task's id, the
// session's id and protocol version, and a fingerprint of the url. A call
// resumed from it (sdk.Request.Resume) follows the task on a raw channel
// of that session (raw.go) without opening one of its own, exactly as the
// first call would have: progress, the tools/call result, a cancel. An
// upstream started as a command is the child of the adapter that started
// it and dies with it: its tasks report no resume state, and their jobs
// fail owner_lost with their replica.

// taskResume is the resume state of a task call.
type taskResume struct {
	Task     string `json:"task"`
	Session  string `json:"session,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// Upstream fingerprints the url the task was created on (which may
	// hold a secret, so it is not kept itself).
	Upstream string `json:"upstream"`
}

// fingerprint is the Upstream of a resume state of u.
func fingerprint(u *upstream) string {
	sum := sha256.Sum256([]byte(u.url))
	return hex.EncodeToString(sum[:8])
}

// reportResume reports the resume state of the task st created, when the
// host keeps it and the task can be followed from elsewhere, and says
// whether it did.
func reportResume(ctx context.Context, u *upstream, st startedTask) bool {
	if u.url == "" || st.session == nil || !sdk.WantsResume(ctx) {
		return false
	}
	rs := taskResume{Task: st.task.TaskID, Session: st.session.ID(), Upstream: fingerprint(u)}
	if ir := st.session.InitializeResult(); ir != nil {
		rs.Protocol = ir.ProtocolVersion
	}
	b, _ := json.Marshal(rs)
	// The call goes on without it (its job then cannot be adopted).
	return sdk.ReportResume(ctx, b) == nil
}

// resumeTask follows the task a call of the same tool created, from its
// resume state (see above).
func (a *adapter) resumeTask(ctx context.Context, u *upstream, state json.RawMessage, progress func(sdk.Progress)) (*gomcp.CallToolResult, error) {
	var rs taskResume
	refused := func(format string, args ...any) error {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label, Rejected: true, Message: fmt.Sprintf(format, args...)}
	}
	switch err := json.Unmarshal(state, &rs); {
	case err != nil || rs.Task == "":
		return nil, refused("the resume state is not a task's: %s", bound(string(state)))
	case u.url == "":
		return nil, refused("%s runs as a command beside each adapter: a task created on another cannot be followed from here", u.label)
	case rs.Upstream != fingerprint(u):
		return nil, refused("task %s was created on another url than the operation's: its config changed since the job started", rs.Task)
	}
	t, err := a.pool.get(u).transport()
	if err != nil {
		return nil, &connectError{err}
	}
	st, ok := t.(*gomcp.StreamableClientTransport)
	if !ok {
		return nil, refused("%s is not served over Streamable HTTP", u.label)
	}
	raw := &rawHTTP{client: st.HTTPClient, url: u.url, sessionID: rs.Session, protocol: rs.Protocol}
	// Ids of its own: the first call's may still be in flight upstream.
	raw.ids.n.Store(rand.Uint64() >> 16)
	cur := &upTask{}
	if err := raw.call(ctx, "tasks/get", map[string]string{"taskId": rs.Task}, cur); err != nil {
		if ctx.Err() != nil && !sdk.HostGone(ctx) {
			cancelTask(ctx, raw, rs.Task) // cancelled as it began
		}
		return nil, resumeLost(rs, err)
	}
	cur.TaskID = rs.Task
	res, err := followTask(ctx, raw, cur, progress, sdk.WantsResume(ctx), nil)
	return res, resumeLost(rs, err)
}

// resumeLost explains a session the upstream no longer knows: one it
// says is missing, or a request it refuses for its session id (HTTP 400,
// as the TypeScript SDK's server answers an unknown one).
func resumeLost(rs taskResume, err error) error {
	var hs *httpStatusError
	if err != nil && (lost(err) || errors.As(err, &hs) && hs.code == http.StatusBadRequest) {
		return fmt.Errorf("%w: the upstream no longer knows the MCP session task %s was created on (it restarted or ended the session), so the task cannot be followed (%v)",
			errTaskSessionGone, rs.Task, err)
	}
	return err
}

// errTaskSessionGone marks a resumed task whose session is gone.
var errTaskSessionGone = errors.New("the task's session is gone")
