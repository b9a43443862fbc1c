package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// logging reports a progress step and a log message at each level, and
// answers with what the host asked for.
type logging struct{}

func (logging) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "logging", Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true, Log: true}, nil
}

func (logging) Invoke(ctx context.Context, _ *sdk.Request) (*sdk.Result, error) {
	for i, l := range sdk.LogLevels {
		_ = sdk.ReportProgress(ctx, sdk.Progress{Progress: float64(i + 1)})
		if err := sdk.ReportLog(ctx, sdk.LogMessage{Level: l, Logger: "t", Data: json.RawMessage(fmt.Sprint(i))}); err != nil {
			return nil, err
		}
	}
	_ = sdk.ReportLog(ctx, sdk.LogMessage{Level: "loud", Data: json.RawMessage(`1`)}) // not a level: dropped
	return &sdk.Result{Text: fmt.Sprintf("progress %v, log %q", sdk.WantsProgress(ctx), sdk.WantsLog(ctx))}, nil
}

// The host asks for log messages at a level and gets those at it and
// above, in order, with or without progress; an adapter without the
// capability, or a host asking for progress alone, gets no relay of logs.
func TestInvokeRelayedLogs(t *testing.T) {
	ctx := context.Background()
	h := adaptertest.New(t, logging{})
	info, err := h.Describe(ctx)
	if err != nil || !info.Capabilities.Log || !info.Log {
		t.Fatalf("describe: %+v %v", info, err)
	}
	req := &sdk.Request{Operation: sdk.Operation{Name: "op"}}
	var logs []string
	progress := 0
	collect := func(m sdk.LogMessage) { logs = append(logs, m.Level+"="+string(m.Data)) }
	res, err := h.Client.InvokeRelayed(ctx, req, info.Capabilities, client.Relay{LogLevel: "critical", Log: collect})
	if err != nil || res.Text != `progress false, log "critical"` || strings.Join(logs, " ") != "critical=5 alert=6 emergency=7" {
		t.Fatalf("logs only: %+v %v %q", res, err, logs)
	}
	logs = nil
	res, err = h.Client.InvokeRelayed(ctx, req, info.Capabilities, client.Relay{LogLevel: "alert", Log: collect,
		Progress: func(sdk.Progress) { progress++ }})
	if err != nil || res.Text != `progress true, log "alert"` || len(logs) != 2 || progress != 8 {
		t.Fatalf("both: %+v %v %q %d", res, err, logs, progress)
	}
	// Progress alone is what a host that predates the relay asks for.
	logs = nil
	res, err = h.Client.InvokeWithProgress(ctx, req, info.Capabilities, func(sdk.Progress) {})
	if err != nil || res.Text != `progress true, log ""` || len(logs) != 0 {
		t.Fatalf("progress alone: %+v %v", res, err)
	}
	noLog := info.Capabilities
	noLog.Log = false
	for _, c := range []struct {
		caps client.Capabilities
		r    client.Relay
	}{{noLog, client.Relay{LogLevel: "debug", Log: collect}}, {info.Capabilities, client.Relay{LogLevel: "verbose", Log: collect}}} {
		if res, err = h.Client.InvokeRelayed(ctx, req, c.caps, c.r); err != nil || res.Text != `progress false, log ""` || len(logs) != 0 {
			t.Fatalf("no logs to ask for: %+v %v %q", res, err, logs)
		}
	}
}
