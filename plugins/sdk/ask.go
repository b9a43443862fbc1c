package sdk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// ClientError is a JSON-RPC error answering a client request (AskClient):
// the client's own, or the host's when it could not ask the client.
type ClientError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON, possibly empty.
	Data json.RawMessage
}

func (e *ClientError) Error() string { return fmt.Sprintf("client error %d: %s", e.Code, e.Message) }

// ClientCapabilities returns the MCP capabilities of the client of the
// call whose context ctx is (the ClientCapabilities object as JSON), when
// the host answers the call's client requests (AskClient); nil otherwise,
// and then the adapter must answer its upstream's requests itself (e.g.
// "not supported").
func ClientCapabilities(ctx context.Context) json.RawMessage {
	if r, ok := ctx.Value(progressKey{}).(*progressReporter); ok && r.client != nil {
		return r.client
	}
	return nil
}

// TakesInputRequired reports whether the host takes an input-required
// result for the call whose context ctx is (its client, of MCP
// 2026-07-28, cannot be asked during the call: AskClient fails): the
// adapter then answers what it would ask with Result.InputRequired, and
// the host sends the call again with Request.Input, the client's answers.
func TakesInputRequired(ctx context.Context) bool {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	return ok && r.client != nil && r.inputRequired
}

// InputRequired is what a call needs of its client before it can answer
// (MCP SEP-2322's InputRequiredResult).
type InputRequired struct {
	// Requests is the inputRequests object: a key of the adapter's for
	// each request, and the request ({"method": ..., "params": ...}).
	Requests json.RawMessage
	// State is what the adapter needs back to go on (e.g. its upstream's
	// requestState), returned in Request.Input. The host seals it before
	// the client sees it, so it comes back as the adapter gave it.
	State string
}

// InputResponses are the client's answers to an InputRequired.
type InputResponses struct {
	// Responses is the inputResponses object: a key of Requests and the
	// client's result.
	Responses json.RawMessage
	// State is InputRequired.State, unchanged.
	State string
}

func inputFromProto(in *adapterv1.InputResponses) *InputResponses {
	if in == nil {
		return nil
	}
	return &InputResponses{Responses: in.GetInputResponsesJson(), State: in.GetRequestState()}
}

func inputRequiredToProto(ir *InputRequired) *adapterv1.InputRequired {
	if ir == nil {
		return nil
	}
	return &adapterv1.InputRequired{InputRequestsJson: ir.Requests, RequestState: ir.State}
}

// AskClient sends a request of the upstream to the client of the call
// whose context ctx is, e.g. an MCP upstream's elicitation/create with
// its params as a JSON object, and waits for the answer: the client's
// result as JSON, or a *ClientError. It fails with ErrCallEnded when the
// host does not answer the call's client requests (ClientCapabilities is
// nil) or the call has answered, and with ctx's error when ctx ends
// first. Several requests of one call may wait at once.
func AskClient(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	if !ok || r.client == nil || r.inputRequired {
		return nil, ErrCallEnded
	}
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	id, ch, done := r.asks.open()
	defer done()
	err := r.report(func() error {
		return r.sendAsk(&adapterv1.ClientRequest{Id: id, Method: method, ParamsJson: params})
	})
	if err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		if e := a.GetError(); e != nil {
			return nil, &ClientError{Code: e.GetCode(), Message: e.GetMessage(), Data: e.GetDataJson()}
		}
		return a.GetResultJson(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// clientAsks are an adapter's client requests waiting for their answers,
// by their ids: random, so that no answer reaches another call's request.
type clientAsks struct {
	mu      sync.Mutex
	waiting map[string]chan *adapterv1.ClientAnswer
}

func (a *clientAsks) open() (string, <-chan *adapterv1.ClientAnswer, func()) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id, ch := hex.EncodeToString(b[:]), make(chan *adapterv1.ClientAnswer, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = map[string]chan *adapterv1.ClientAnswer{}
	}
	a.waiting[id] = ch
	return id, ch, func() {
		a.mu.Lock()
		delete(a.waiting, id)
		a.mu.Unlock()
	}
}

// answer hands an answer to the request it names, if it still waits.
func (a *clientAsks) answer(ans *adapterv1.ClientAnswer) bool {
	a.mu.Lock()
	ch, ok := a.waiting[ans.GetId()]
	delete(a.waiting, ans.GetId())
	a.mu.Unlock()
	if ok {
		ch <- ans
	}
	return ok
}

// AnswerClientRequest hands the host's answer to a client request to the
// AskClient that waits for it.
func (s *server) AnswerClientRequest(_ context.Context, ans *adapterv1.ClientAnswer) (*adapterv1.ClientAnswerAck, error) {
	if !s.asks.answer(ans) {
		return nil, status.Error(codes.NotFound, "no client request waits for this answer")
	}
	return &adapterv1.ClientAnswerAck{}, nil
}
