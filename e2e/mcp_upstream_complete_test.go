package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// completingUpstream is publishingUpstream with completions of its
// greet prompt's and day template's arguments and subscriptions, which
// it records.
type completingUpstream struct {
	*mcp.Server
	mu           sync.Mutex
	subs, unsubs []string
}

func newCompletingUpstream() *completingUpstream {
	cu := &completingUpstream{}
	cu.Server = publishingUpstreamWith(&mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var all []string
			switch p := req.Params; {
			case p.Ref.Type == "ref/prompt" && p.Ref.Name == "greet" && p.Argument.Name == "name":
				all = []string{"Ada", "Alan", "Grace"}
			case p.Ref.Type == "ref/resource" && p.Ref.URI == "file:///days/{day}" && p.Argument.Name == "day":
				all = []string{"monday", "tuesday", "thursday"}
			}
			out := []string{}
			for _, v := range all {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					out = append(out, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: out}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			cu.mu.Lock()
			defer cu.mu.Unlock()
			cu.subs = append(cu.subs, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			cu.mu.Lock()
			defer cu.mu.Unlock()
			cu.unsubs = append(cu.unsubs, req.Params.URI)
			return nil
		},
	})
	return cu
}

func (cu *completingUpstream) counts() (subs, unsubs int) {
	cu.mu.Lock()
	defer cu.mu.Unlock()
	return len(cu.subs), len(cu.unsubs)
}

// TestMCPUpstreamCompletionsAndSubscriptions: a go-sdk upstream's
// completions and resource subscriptions reach go-sdk clients of both
// protocol generations through the built gateway: the capabilities are
// offered, a prompt's (published under its prefixed name) and a
// template's arguments complete upstream, a subscription to a published
// resource gets the upstream's notifications/resources/updated, and the
// gateway unsubscribes upstream when the client does. A gateway over an
// upstream that offers neither offers neither.
func TestMCPUpstreamCompletionsAndSubscriptions(t *testing.T) {
	t.Parallel()
	up := newCompletingUpstream()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: gosdk
    description: A go-sdk server over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      prefix: go_
      resources: true
      prompts: true
`, srv.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	for _, version := range []string{"2025-11-25", ""} { // "": the go-sdk client's own choice, 2026-07-28
		t.Run("protocol "+version, func(t *testing.T) {
			updated := make(chan string, 8)
			client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					updated <- req.Params.URI
				}})
			var opts *mcp.ClientSessionOptions
			if version != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, opts)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, g.log.String())
			}
			defer cs.Close()
			caps := serverCaps(cs)
			if caps == nil || caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe {
				t.Fatalf("capabilities %+v", caps)
			}
			res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "go_greet"},
				Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
			if err != nil || !slices.Equal(res.Completion.Values, []string{"Ada", "Alan"}) {
				t.Errorf("complete go_greet's name: %+v %v", res, err)
			}
			res, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "file:///days/{day}"},
				Argument: mcp.CompleteParamsArgument{Name: "day", Value: "t"}})
			if err != nil || !slices.Equal(res.Completion.Values, []string{"tuesday", "thursday"}) {
				t.Errorf("complete day: %+v %v", res, err)
			}
			if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nope"},
				Argument: mcp.CompleteParamsArgument{Name: "x"}}); err == nil || !strings.Contains(err.Error(), `unknown prompt "nope"`) {
				t.Errorf("complete an unknown prompt: %v", err)
			}

			subs, unsubs := up.counts()
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///notes.txt"}); err != nil {
				t.Fatalf("subscribe: %v\n%s", err, g.log.String())
			}
			waitFor(t, "the gateway subscribes upstream", func() bool { s, _ := up.counts(); return s == subs+1 })
			// The upstream says the notes changed until the client hears
			// it: a 2026-07-28 client's listen stream is acknowledged
			// asynchronously.
			waitFor(t, "notifications/resources/updated", func() bool {
				_ = up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///notes.txt"})
				select {
				case uri := <-updated:
					if uri != "file:///notes.txt" {
						t.Errorf("update of %q", uri)
					}
					return true
				case <-time.After(100 * time.Millisecond):
					return false
				}
			})
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "file:///notes.txt"}); err != nil {
				t.Fatalf("unsubscribe: %v", err)
			}
			waitFor(t, "the gateway unsubscribes upstream", func() bool { _, u := up.counts(); return u == unsubs+1 })
			// (A 2026-07-28 client subscribes on a listen stream of its
			// own, whose refusal Subscribe does not wait for.)
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///elsewhere"}); version != "" && err == nil {
				t.Errorf("subscribe to an unpublished URI succeeded")
			}
		})
	}

	// A session that ends without unsubscribing: the gateway unsubscribes
	// upstream at the next update, which reaches no one.
	cs := g.connect(ctx)
	subs, unsubs := up.counts()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///notes.txt"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	waitFor(t, "the gateway subscribes upstream", func() bool { s, _ := up.counts(); return s == subs+1 })
	_ = cs.Close()
	waitFor(t, "the gateway unsubscribes upstream for the closed session", func() bool {
		_ = up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///notes.txt"})
		_, u := up.counts()
		return u == unsubs+1
	})

	plain := publishingUpstream()
	psrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain }, nil))
	t.Cleanup(psrv.Close)
	g2 := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: gosdk
    description: A go-sdk server without completions or subscriptions.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      resources: true
      prompts: true
`, psrv.URL)})
	cs = g2.connect(ctx)
	if caps := serverCaps(cs); caps == nil || caps.Completions != nil || caps.Resources == nil || caps.Resources.Subscribe {
		t.Errorf("capabilities over an upstream without completions or subscriptions: %+v", caps)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name"}}); err == nil || !strings.Contains(err.Error(), "method not found") {
		t.Errorf("complete where no upstream offers completions: %v", err)
	}
}

// serverCaps is what the server said it can do.
func serverCaps(cs *mcp.ClientSession) *mcp.ServerCapabilities {
	if ir := cs.InitializeResult(); ir != nil {
		return ir.Capabilities
	}
	return nil
}
