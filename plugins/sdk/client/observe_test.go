package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// ticker streams items until it is cancelled; an invoke with arguments
// {"fail":true} fails upstream.
type ticker struct{ echo }

func (ticker) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "ticker", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}}, nil
}

func (ticker) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	if string(req.Arguments) == `{"fail":true}` {
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Message: "503"}
	}
	return &sdk.Result{Structured: req.Arguments}, nil
}

func (ticker) Stream(ctx context.Context, _ *sdk.Request, send sdk.StreamSender) error {
	for i := 0; ; i++ {
		if err := send.Item(sdk.Item{Data: []byte(`{}`)}); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// The observer sees every call before it is sent, may set its trace
// context, and learns each outcome once: an invoke's, and a stream's when
// its caller stops reading and cancels it.
func TestObserver(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, ticker{})
	var mu sync.Mutex
	var seen []string
	var outcomes []error
	h.Client.Observe(func(_ context.Context, rpc string, req *sdk.Request) func(error) {
		req.Context.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		mu.Lock()
		seen = append(seen, rpc)
		mu.Unlock()
		return func(err error) {
			mu.Lock()
			outcomes = append(outcomes, err)
			mu.Unlock()
		}
	})
	if _, err := h.Client.Invoke(ctxT(t), &sdk.Request{Arguments: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Invoke(ctxT(t), &sdk.Request{Arguments: []byte(`{"fail":true}`)}); err == nil {
		t.Fatal("no upstream error")
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := h.Client.Stream(ctx, &sdk.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel() // the caller stops reading
	for range 100 {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	// Items already received may still be read after the cancel; the
	// stream's outcome is reported when the cancel is seen.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(outcomes)
		mu.Unlock()
		if n >= 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0] != "invoke" || seen[2] != "stream" {
		t.Fatalf("seen %v", seen)
	}
	var ue *sdk.UpstreamError
	if len(outcomes) != 3 || outcomes[0] != nil || !errors.As(outcomes[1], &ue) || !(errors.Is(outcomes[2], context.Canceled) || client.CodeOf(outcomes[2]) == client.Cancelled) {
		t.Errorf("outcomes %v", outcomes)
	}
}
