package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReloadRemovingEndpointEndsItsRunners serves the same operations on
// two endpoints, each of its own operations file, and runs a job and a
// stream session on the one a reload then removes, and a job on the one it
// keeps. The removed endpoint's session and job end — their upstream
// requests are cancelled — and a client reading them through the kept
// endpoint (same workspace, same operations) sees the session stopped and
// the job canceled, both saying why; the kept endpoint's job runs on to
// its result.
func TestReloadRemovingEndpointEndsItsRunners(t *testing.T) {
	t.Parallel()
	up := newFeedUpstream(t)
	ops := familiesOps(up.URL)
	opts := gatewayOptions{Operations: ops, Handler: "agent_header X-Agent-Id"}
	g := startGateway(t, opts)
	otherOps := filepath.Join(g.dir, "other.yaml")
	writeFile(t, otherOps, ops)
	withOther := opts
	withOther.Site = fmt.Sprintf("crank /other %s {\n\t\tagent_header X-Agent-Id\n\t}", otherOps)
	g.reload(withOther)
	ctx := context.Background()
	connect := func(url string) *mcp.ClientSession {
		return g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: &http.Client{Transport: headerTransport{"X-Agent-Id": "agent-1"}}})
	}
	kept := connect(g.MCPURL)
	removed := connect(strings.TrimSuffix(g.MCPURL, "/mcp") + "/other")

	doomedJob := callOK(t, removed, "export_start", map[string]any{"ms": 600000})["job_id"].(string)
	<-up.jobStarted
	session := callOK(t, removed, "follow_start", nil)["session_id"].(string)
	waitFor(t, "the session's feed", func() bool { return up.feedOpen.Load() == 1 })
	keptJob := callOK(t, kept, "export_start", map[string]any{"ms": 8000})["job_id"].(string)
	<-up.jobStarted

	g.reload(opts) // without /other
	select {
	case <-up.jobCancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the removed endpoint's job kept its upstream request")
	}
	waitFor(t, "the removed endpoint's session to close its feed", func() bool { return up.feedOpen.Load() == 0 })

	st := callOK(t, kept, "export_status", map[string]any{"job_id": doomedJob})
	if st["status"] != "canceled" || !strings.Contains(fmt.Sprint(st["error"]), "endpoint_removed") {
		t.Errorf("the removed endpoint's job: %v", st)
	}
	poll := callOK(t, kept, "follow_poll", map[string]any{"session_id": session})
	if poll["status"] != "stopped" || poll["end_reason"] != "endpoint_removed" ||
		!strings.Contains(fmt.Sprint(poll["error"]), "reload removed the endpoint") {
		t.Errorf("the removed endpoint's session: %v", poll)
	}
	var res map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res = callOK(t, kept, "export_status", map[string]any{"job_id": keptJob})
		if res["status"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	if res["status"] != "succeeded" {
		t.Errorf("the kept endpoint's job after the reload: %v", res)
	}
}
