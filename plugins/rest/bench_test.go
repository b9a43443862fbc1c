package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// The benchmarks call the same loopback server three ways so the adapter's
// overhead can be read as a ratio:
//
//	BenchmarkDirect         plain net/http client (the floor)
//	BenchmarkAdapterDirect  the adapter's Invoke in-process (adapter cost)
//	BenchmarkInvoke         through adaptertest: gRPC on a unix socket
//	                        (adapter + plugin protocol cost)

const benchAnswer = `{"id":42,"name":"Ann","email":"ann@example.com","roles":["admin","dev"],"active":true}`

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchAnswer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchConfig(srv *httptest.Server) map[string]any {
	return map[string]any{
		"method":  "GET",
		"url":     srv.URL + "/users/{id}",
		"query":   []string{"verbose"},
		"headers": map[string]string{"X-Api-Key": "secret"},
	}
}

var benchArgs = map[string]any{"id": 42, "verbose": true}

// newBenchHarness serves the adapter in this process, described as the
// host describes it, so that its calls take the host's path.
func newBenchHarness(b *testing.B) *adaptertest.Harness {
	h := adaptertest.New(b, rest.New())
	if _, err := h.Describe(context.Background()); err != nil {
		b.Fatal(err)
	}
	return h
}

func BenchmarkInvoke(b *testing.B) {
	srv := benchServer(b)
	h := newBenchHarness(b)
	call := adaptertest.Call{Config: benchConfig(srv), Args: benchArgs}
	// Pre-marshal so the benchmark measures the call, not the harness's JSON.
	cfg, _ := json.Marshal(call.Config)
	args, _ := json.Marshal(call.Args)
	call.Config, call.Args = json.RawMessage(cfg), json.RawMessage(args)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, ue, err := h.Invoke(ctx, call)
		if err != nil || ue != nil || len(res.Structured) != len(benchAnswer) {
			b.Fatalf("invoke: %v %v", err, ue)
		}
	}
}

func BenchmarkAdapterDirect(b *testing.B) {
	srv := benchServer(b)
	a := rest.New()
	cfg, _ := json.Marshal(benchConfig(srv))
	args, _ := json.Marshal(benchArgs)
	req := &sdk.Request{Operation: sdk.Operation{Config: cfg}, Arguments: args}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Invoke(ctx, req)
		if err != nil || len(res.Structured) != len(benchAnswer) {
			b.Fatalf("invoke: %v", err)
		}
	}
}

func BenchmarkDirect(b *testing.B) {
	srv := benchServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	url := srv.URL + "/users/42?verbose=true"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		directGet(b, ctx, client, url)
	}
}

// directGet is the call the adapter makes, made with client: GET url with
// the headers the adapter sends, the whole answer read.
func directGet(b *testing.B, ctx context.Context, client *http.Client, url string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("X-Api-Key", "secret")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "crank-rest/0.1.0")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != len(benchAnswer) {
		b.Fatalf("read: %v", err)
	}
}

// BenchmarkInvokeParallel shows the adapter under concurrent load.
func BenchmarkInvokeParallel(b *testing.B) {
	srv := benchServer(b)
	h := newBenchHarness(b)
	cfg, _ := json.Marshal(benchConfig(srv))
	args, _ := json.Marshal(benchArgs)
	call := adaptertest.Call{Config: json.RawMessage(cfg), Args: json.RawMessage(args)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, ue, err := h.Invoke(ctx, call); err != nil || ue != nil {
				b.Errorf("invoke: %v %v", err, ue)
				return
			}
		}
	})
}
