package openapi_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
)

func TestZZMeasure(t *testing.T) {
	doc := os.Getenv("MEAS_DOC")
	if doc == "" {
		t.Skip()
	}
	a := rest.New().(sdk.OperationExpander)
	m := map[string]any{"document": doc, "base_url": "http://127.0.0.1:1", "credentials": map[string]any{"bearerAuth": "k", "basicAuth": map[string]any{"username": "u", "password": "p"}}}
	if os.Getenv("MEAS_NOOUT") != "" {
		m["output_schemas"] = false
	}
	cfg, _ := json.Marshal(map[string]any{"openapi": m})
	op := &sdk.Operation{Name: "x", Config: cfg, BaseDir: "/"}
	start := time.Now()
	tools, diags := a.ExpandOperation(context.Background(), op)
	el := time.Since(start)
	var in, out, max int
	for _, tl := range tools {
		in += len(tl.InputSchema)
		out += len(tl.OutputSchema)
		if len(tl.OutputSchema) > max {
			max = len(tl.OutputSchema)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("tools=%d diags=%d time=%v in=%d out=%d maxout=%d heapsys=%dMiB", len(tools), len(diags), el, in, out, max, ms.HeapSys>>20)
	for i, d := range diags {
		if i < 15 {
			t.Logf("%s %s", d.Field, d.Message)
		}
	}
}
