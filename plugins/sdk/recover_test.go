package sdk_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// A panic whose value holds a secret, in a call the SDK makes into the
// adapter or in a goroutine of the adapter's own under sdk.Recover, fails
// that call with an internal error: the secret is neither in the error the
// host gets nor in the adapter's log (its stderr, which the host logs),
// which names the panic's type and where it happened.
func TestPanicValueNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token-4711" // testdata/panicky's
	exe := adaptertest.Build(t, "testdata/panicky")
	// go-plugin's goroutines write the log under mu.
	var logged bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(exe.Path)
	cmd.Env = os.Environ()
	p, err := client.Start(client.Config{Cmd: cmd,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "panicky", Level: hclog.Trace, Output: &logged, Mutex: &mu})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	ctx := context.Background()
	op := &sdk.Operation{Name: "op", Config: []byte(`{}`)}
	_, invokeErr := p.Invoke(ctx, &sdk.Request{Operation: *op})
	if client.CodeOf(invokeErr) != client.Internal || !strings.Contains(invokeErr.Error(), "invoke: internal error (panic), see the adapter log") {
		t.Errorf("invoke: %v", invokeErr)
	}
	_, _, expandErr := p.Expand(ctx, op)
	if client.CodeOf(expandErr) != client.Internal || !strings.Contains(expandErr.Error(), "expand: internal error (panic)") {
		t.Errorf("expand: %v", expandErr)
	}
	wop := *op
	wop.Mode = sdk.ModeWindow
	st, streamErr := p.Stream(ctx, &sdk.Request{Operation: wop})
	if streamErr == nil {
		_, streamErr = st.Recv()
	}
	if client.CodeOf(streamErr) != client.Internal || !strings.Contains(streamErr.Error(), "panicky: reader: internal error (panic)") {
		t.Errorf("stream: %v", streamErr)
	}
	// Still serving.
	if _, err := p.Describe(ctx, ""); err != nil {
		t.Fatalf("describe after the panics: %v", err)
	}
	p.Kill() // waits for the adapter's stderr to be logged
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	for what, s := range map[string]string{"invoke": invokeErr.Error(), "expand": expandErr.Error(), "stream": streamErr.Error(), "the log": log} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the panic's value: %s", what, s)
		}
	}
	// The host's logger orders the fields as it likes.
	for _, want := range []string{"[ERROR] panicky.panicky: recovered a panic", "where=invoke", "panic_type=string",
		"where=expand", `panic_type="*errors.errorString"`, `where="panicky: reader"`, `panic_type="struct { Token string }"`, "goroutine "} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}
