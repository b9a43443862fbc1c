package admin

import (
	"bytes"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// Live entry kinds in paths.
const (
	liveMCPSessions    = "mcp-sessions"
	liveStreamSessions = "sessions"
	liveJobs           = "jobs"
)

// LiveEntry is one open MCP session, stream session or job.
type LiveEntry struct {
	// ID names the entry for a stop: a stream session's or job's ID, an
	// MCP session's digest (store.MCPSessionDigest) — never its ID, which
	// is its client's credential.
	ID        string    `json:"id"`
	Agent     string    `json:"agent,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Status    string    `json:"status,omitempty"`
	Client    string    `json:"client,omitempty"`
	Owner     string    `json:"owner_replica,omitempty"`
	Created   time.Time `json:"created"`
	AgeMS     int64     `json:"age_ms"`
	Expires   time.Time `json:"expires,omitzero"`
}

func liveSummary(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, err := g.Store.CountLive(r.Context(), args[0])
	if err != nil {
		return storeError(err, "workspace "+args[0])
	}
	return writeJSON(w, http.StatusOK, map[string]any{"workspace": args[0], "counts": c})
}

func liveList(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	ws, kind := args[0], args[1]
	limit, e := queryInt(r, "limit", 100, 1, store.MaxLivePage)
	if e != nil {
		return e
	}
	after := r.URL.Query().Get("after")
	ctx := r.Context()
	now := g.now()
	var out []LiveEntry
	var next string
	var owners []string
	switch kind {
	case liveMCPSessions:
		ss, n, err := g.Store.ListMCPSessions(ctx, ws, after, int(limit))
		if err != nil {
			return storeError(err, "workspace "+ws)
		}
		next = n
		for _, s := range ss {
			out = append(out, LiveEntry{ID: store.MCPSessionDigest(s.ID), Agent: s.AgentID, Client: s.ClientName, Created: s.CreatedAt,
				AgeMS: now.Sub(s.CreatedAt).Milliseconds()})
		}
	case liveStreamSessions:
		ss, n, err := g.Store.ListOpenStreamSessions(ctx, ws, after, int(limit))
		if err != nil {
			return storeError(err, "workspace "+ws)
		}
		next = n
		for _, s := range ss {
			owners = append(owners, s.Owner)
			out = append(out, LiveEntry{ID: s.ID, Agent: s.AgentID, Operation: s.OperationID, Status: string(s.Status),
				Owner: s.Owner, Created: s.CreatedAt, AgeMS: now.Sub(s.CreatedAt).Milliseconds(), Expires: s.ExpiresAt})
		}
	case liveJobs:
		js, n, err := g.Store.ListOpenJobs(ctx, ws, after, int(limit))
		if err != nil {
			return storeError(err, "workspace "+ws)
		}
		next = n
		for _, j := range js {
			owners = append(owners, j.Owner)
			out = append(out, LiveEntry{ID: j.ID, Agent: j.AgentID, Operation: j.OperationID, Status: string(j.Status),
				Owner: j.Owner, Created: j.CreatedAt, AgeMS: now.Sub(j.CreatedAt).Milliseconds(), Expires: j.ExpiresAt})
		}
	default:
		return errorf(http.StatusNotFound, "no live state kind %q: mcp-sessions, sessions or jobs", kind)
	}
	if len(owners) > 0 {
		names, err := g.Store.ReplicaNames(ctx, owners)
		if err == nil {
			for i := range out {
				if out[i].Owner == "" {
					continue
				}
				if n, ok := names[out[i].Owner]; ok {
					out[i].Owner = n
				} else {
					out[i].Owner += " (gone)"
				}
			}
		}
	}
	if out == nil {
		out = []LiveEntry{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"workspace": ws, "kind": kind, "entries": out, "next": next})
}

// liveStop stops a stream session, cancels a job or ends an MCP session
// of a workspace, whoever opened it; an MCP session is named by its
// digest, as liveList shows it.
func liveStop(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	ws, kind, id := args[0], args[1], args[2]
	ctx := r.Context()
	who, _ := caller(r)
	reason := "stopped by an operator (" + who + ")"
	var err error
	var status string
	switch kind {
	case liveMCPSessions:
		var s *store.MCPSession
		if s, err = g.Store.OperatorMCPSession(ctx, ws, id); err == nil {
			err = g.Store.DeleteMCPSession(ctx, s.ID)
			status = "deleted"
		}
	case liveStreamSessions:
		var s *store.StreamSession
		if s, err = g.Store.OperatorStreamSession(ctx, ws, id); err == nil {
			s, err = g.Store.CloseStreamSession(ctx, store.Scope{WorkspaceID: s.WorkspaceID, AgentID: s.AgentID}, id, reason)
			if err == nil {
				status = string(s.Status)
			}
		}
	case liveJobs:
		var j *store.AsyncJobHandle
		if j, err = g.Store.OperatorJob(ctx, ws, id); err == nil {
			j, err = g.Store.CancelJob(ctx, store.Scope{WorkspaceID: j.WorkspaceID, AgentID: j.AgentID}, id, reason)
			if err == nil {
				status = string(j.Status)
			}
		}
	default:
		return errorf(http.StatusNotFound, "no live state kind %q: mcp-sessions, sessions or jobs", kind)
	}
	g.audit(r, "live.stop", "", err, zap.String("workspace", ws), zap.String("kind", kind), zap.String("id", id))
	if err != nil && kind == liveMCPSessions {
		// Not echoed: what was sent may be a session ID.
		return storeError(err, "MCP session (named by the id the list shows, its digest, not by its Mcp-Session-Id)")
	}
	if err != nil {
		return storeError(err, kind+" "+id)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"workspace": ws, "kind": kind, "id": id, "status": status})
}
