package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// asking asks the call's client twice at once during a call (as an
// upstream's concurrent requests would) and answers what it got.
type asking struct{}

func (asking) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "asking", Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true, ClientRequests: true}, nil
}

func (asking) Invoke(ctx context.Context, _ *sdk.Request) (*sdk.Result, error) {
	caps := sdk.ClientCapabilities(ctx)
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for _, m := range []string{"elicitation/create", "roots/list"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sdk.AskClient(ctx, m, json.RawMessage(`{"message":"hi"}`))
			var ce *sdk.ClientError
			s := m + " " + string(res)
			if errors.As(err, &ce) {
				s = fmt.Sprintf("%s error %d %s", m, ce.Code, ce.Message)
			} else if err != nil {
				s = m + " " + err.Error()
			}
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(got) == 2 && got[0] > got[1] {
		got[0], got[1] = got[1], got[0]
	}
	return &sdk.Result{Text: fmt.Sprintf("caps %s; %s", caps, strings.Join(got, "; "))}, nil
}

// The host relays an adapter's client requests when it offers the
// client's capabilities: each reaches Relay.Ask with its method and
// params, and its result or JSON-RPC error goes back to the AskClient
// that waits for it. A host that offers none (no capabilities, or an
// adapter without the capability) leaves AskClient failing at once.
func TestAskClient(t *testing.T) {
	ctx := context.Background()
	h := adaptertest.New(t, asking{})
	info, err := h.Describe(ctx)
	if err != nil || !info.Capabilities.ClientRequests || !info.ClientRequests {
		t.Fatalf("describe: %+v %v", info, err)
	}
	req := &sdk.Request{Operation: sdk.Operation{Name: "op"}}
	var mu sync.Mutex
	var asked []string
	r := client.Relay{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`),
		Ask: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			asked = append(asked, method+" "+string(params))
			mu.Unlock()
			if method == "roots/list" {
				return nil, &sdk.ClientError{Code: -32601, Message: "no roots"}
			}
			return json.RawMessage(`{"action":"accept"}`), nil
		}}
	res, err := h.Client.InvokeRelayed(ctx, req, info.Capabilities, r)
	want := `caps {"elicitation":{}}; elicitation/create {"action":"accept"}; roots/list error -32601 no roots`
	if err != nil || res.Text != want {
		t.Fatalf("relayed: %+v %v\nwant %s", res, err, want)
	}
	if len(asked) != 2 || !strings.Contains(strings.Join(asked, "|"), `elicitation/create {"message":"hi"}`) {
		t.Errorf("asked %q", asked)
	}
	ended := `caps ; elicitation/create the call has ended; roots/list the call has ended`
	noAsk := info.Capabilities
	noAsk.ClientRequests = false
	for _, c := range []struct {
		caps client.Capabilities
		r    client.Relay
	}{{noAsk, r}, {info.Capabilities, client.Relay{Ask: r.Ask}}} {
		if res, err := h.Client.InvokeRelayed(ctx, req, c.caps, c.r); err != nil || res.Text != ended {
			t.Errorf("no client requests offered: %+v %v", res, err)
		}
	}
}

// deferring answers with an input-required result when the host takes
// one, and with the client's answers when the call comes again.
type deferring struct{ asking }

func (deferring) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	if req.Input != nil {
		return &sdk.Result{Text: fmt.Sprintf("%s %s", req.Input.Responses, req.Input.State)}, nil
	}
	if _, err := sdk.AskClient(ctx, "roots/list", nil); !sdk.TakesInputRequired(ctx) || !errors.Is(err, sdk.ErrCallEnded) {
		return nil, fmt.Errorf("takes input-required %v, ask %v", sdk.TakesInputRequired(ctx), err)
	}
	return &sdk.Result{InputRequired: &sdk.InputRequired{Requests: json.RawMessage(`{"r":{"method":"roots/list"}}`), State: "st"}}, nil
}

// A host whose client takes input-required results (2026-07-28) gets the
// adapter's InputRequired in place of client requests, and its retry
// brings the client's answers and the state back to the adapter.
func TestInputRequired(t *testing.T) {
	ctx := context.Background()
	h := adaptertest.New(t, deferring{})
	info, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &sdk.Request{Operation: sdk.Operation{Name: "op"}}
	res, err := h.Client.InvokeRelayed(ctx, req, info.Capabilities, client.Relay{ClientCapabilities: json.RawMessage(`{"roots":{}}`), InputRequired: true})
	if err != nil || res.InputRequired == nil || string(res.InputRequired.Requests) != `{"r":{"method":"roots/list"}}` || res.InputRequired.State != "st" {
		t.Fatalf("first: %+v %v", res, err)
	}
	req.Input = &sdk.InputResponses{Responses: json.RawMessage(`{"r":{"roots":[]}}`), State: "st"}
	if res, err = h.Client.Invoke(ctx, req); err != nil || res.Text != `{"r":{"roots":[]}} st` {
		t.Fatalf("retry: %+v %v", res, err)
	}
}
