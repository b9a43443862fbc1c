package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// cutAfterPrime ends a response body right after its priming event, as a
// dropped connection would.
type cutAfterPrime struct {
	rd   *bufio.Reader
	body io.Closer
	done bool
}

func (c *cutAfterPrime) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	line, err := c.rd.ReadString('\n')
	if line == "\n" {
		c.done = true // the priming event is complete
	}
	return copy(p, line), err
}

func (c *cutAfterPrime) Close() error { return c.body.Close() }

// dropFirstCall drops the SSE stream of the first tools/call after its
// priming event and sends every later request to another replica, as if
// the first replica's connection broke and the load balancer moved on.
type dropFirstCall struct {
	rt      *router
	next    *replica
	dropped atomic.Bool
}

func (d *dropFirstCall) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := d.rt.RoundTrip(req)
	if err != nil || !bytes.Contains(body, []byte(`"tools/call"`)) || d.dropped.Swap(true) {
		return resp, err
	}
	resp.Body = &cutAfterPrime{rd: bufio.NewReader(resp.Body), body: resp.Body}
	d.rt.to(d.next)
	return resp, nil
}

// TestResumeOnAnotherReplica loses a call's stream on replica A right
// after the priming event; the go-sdk client resumes it with
// Last-Event-ID at replica B, which rebuilds the session from etcd and
// replays the call's response from the event log A wrote there.
func TestResumeOnAnotherReplica(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	a, b := newReplica(t, st, up.URL, "default"), newReplica(t, st, up.URL, "default")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rt := &router{}
	rt.to(a)
	drop := &dropFirstCall{rt: rt, next: b}
	client := mcp.NewClient(&mcp.Implementation{Name: "resume", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://router/mcp", HTTPClient: &http.Client{Transport: drop}, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatalf("call resumed on B: %v", err)
	}
	if !drop.dropped.Load() || res.IsError || len(res.Content) == 0 ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"id":7`) {
		t.Fatalf("result %+v (dropped %v)", res, drop.dropped.Load())
	}
}
