package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// completingServer is publishServer with completions of the greet
// prompt's and the note template's arguments, and subscriptions: it
// records who subscribed, and says mem://readme changed when asked.
type completingServer struct {
	*gomcp.Server
	mu           sync.Mutex
	subscribed   []string
	unsubscribed []string
}

func newCompletingServer() *completingServer {
	cs := &completingServer{}
	opts := &gomcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *gomcp.CompleteRequest) (*gomcp.CompleteResult, error) {
			p := req.Params
			var all []string
			switch {
			case p.Ref.Type == "ref/prompt" && p.Ref.Name == "greet" && p.Argument.Name == "style":
				all = []string{"warmly", "wryly", "briskly"}
			case p.Ref.Type == "ref/resource" && p.Ref.URI == "mem://notes/{id}" && p.Argument.Name == "id":
				all = []string{"41", "42", "417"}
			}
			var out []string
			for _, v := range all {
				if strings.HasPrefix(v, p.Argument.Value) {
					out = append(out, v)
				}
			}
			return &gomcp.CompleteResult{Completion: gomcp.CompletionResultDetails{Values: out, Total: len(out)}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *gomcp.SubscribeRequest) error {
			cs.mu.Lock()
			defer cs.mu.Unlock()
			cs.subscribed = append(cs.subscribed, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *gomcp.UnsubscribeRequest) error {
			cs.mu.Lock()
			defer cs.mu.Unlock()
			cs.unsubscribed = append(cs.unsubscribed, req.Params.URI)
			return nil
		},
	}
	cs.Server = publishServerWith(opts, false)
	return cs
}

func (cs *completingServer) calls() (sub, unsub []string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.subscribed...), append([]string(nil), cs.unsubscribed...)
}

// An upstream that offers completions and subscriptions: the entry's
// expansion says so, a prompt's and a template's arguments complete
// upstream (the prompt by its upstream name), and a watch of a resource
// subscribes upstream, hears its notifications/resources/updated and
// unsubscribes when it ends. An upstream that offers neither says so.
func TestCompleteAndWatch(t *testing.T) {
	t.Parallel()
	up := newCompletingServer()
	base := map[string]any{"url": serveHTTP(t, up.Server, false)}
	plain := map[string]any{"url": serveHTTP(t, publishServer(false), false), "resources": true, "prompts": true}
	h := newHarness(t) // closed before the upstreams
	info, err := h.Describe(ctxT(t))
	if err != nil || !info.Capabilities.Completions || !info.Capabilities.Subscribe {
		t.Fatalf("describe: %+v %v", info, err)
	}
	_, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{
		Config: with(base, map[string]any{"prefix": "up_", "resources": true, "prompts": true}), Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 || pub == nil || !pub.Completions || !pub.Subscribe {
		t.Fatalf("expand: %+v %v %v", pub, diags, err)
	}
	greet, _ := find(t, pub.Prompts, "up_greet")
	raw, ue, err := h.Complete(ctxT(t), adaptertest.Call{Config: greet.Config, Timeout: 20 * time.Second}, sdk.RefPrompt, "up_greet", "style", "w")
	if err != nil || ue != nil || string(raw) != `{"total":2,"values":["warmly","wryly"]}` {
		t.Errorf("complete greet's style: %s %+v %v", raw, ue, err)
	}
	note, _ := find(t, pub.ResourceTemplates, "up_note")
	raw, ue, err = h.Complete(ctxT(t), adaptertest.Call{Config: note.Config, Timeout: 20 * time.Second}, sdk.RefResource, "mem://notes/{id}", "id", "41")
	if err != nil || ue != nil || string(raw) != `{"total":2,"values":["41","417"]}` {
		t.Errorf("complete note's id: %s %+v %v", raw, ue, err)
	}
	raw, ue, err = h.Complete(ctxT(t), adaptertest.Call{Config: note.Config, Timeout: 20 * time.Second}, sdk.RefResource, "mem://notes/{id}", "nope", "")
	if err != nil || ue != nil || string(raw) != `{"values":[]}` {
		t.Errorf("complete an argument the upstream does not know: %s %+v %v", raw, ue, err)
	}

	readme, _ := find(t, pub.Resources, "up_readme")
	ctx, cancel := context.WithCancel(ctxT(t))
	updates := make(chan string, 4)
	done, err := h.WatchResource(ctx, adaptertest.Call{Config: readme.Config, Timeout: 20 * time.Second}, "mem://readme",
		func(uri string) { updates <- uri })
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if sub, _ := up.calls(); len(sub) != 1 || sub[0] != "mem://readme" {
		t.Errorf("upstream subscriptions %v", sub)
	}
	if err := up.ResourceUpdated(ctxT(t), &gomcp.ResourceUpdatedNotificationParams{URI: "mem://readme"}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updates:
		if uri != "mem://readme" {
			t.Errorf("update of %q", uri)
		}
	case <-ctxT(t).Done():
		t.Fatal("no update")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the watch ended with %v", err)
	}
	waitUntil(t, "the upstream unsubscribes", func() bool { _, unsub := up.calls(); return len(unsub) == 1 })

	_, pub, _, err = h.ExpandPublished(ctxT(t), adaptertest.Call{Config: plain, Timeout: 20 * time.Second})
	if err != nil || pub == nil || pub.Completions || pub.Subscribe {
		t.Errorf("an upstream without completions or subscriptions: %+v %v", pub, err)
	}
	if b, _ := json.Marshal(pub); strings.Contains(string(b), `"Completions":true`) {
		t.Errorf("%s", b)
	}
}
