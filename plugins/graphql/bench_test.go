package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// BenchmarkQueryCall measures the added latency of a GraphQL query tool
// call over a direct POST of the same request to the same loopback
// graphql-go server, in one run:
//
//	direct   net/http POST of the query JSON (the floor)
//	adapter  the adapter's Invoke in-process: argument coercion, request,
//	         answer classification
//	invoke   through adaptertest: the adapter behind real gRPC (what the
//	         host pays, less process boundaries)
//
// It prints p50 latencies and their ratios to the direct POST.
func BenchmarkQueryCall(b *testing.B) {
	u := newUpstream(b)
	a := graphql.New()
	x := a.(sdk.OperationExpander)
	cfg, _ := json.Marshal(map[string]any{"endpoint": u.URL, "query": "query GetBook($id: ID!) { book(id: $id) { id title genre pages author { name } } }",
		"headers": map[string]string{"Authorization": "Bearer t"}})
	tools, diags := x.ExpandOperation(context.Background(), &sdk.Operation{Name: "get_book", Config: cfg})
	if len(tools) != 1 || len(diags) != 0 {
		b.Fatalf("expand: %v %v", tools, diags)
	}
	toolCfg := tools[0].Config
	args := json.RawMessage(`{"id":"1"}`)
	const answer = `{"data":{"book":{"id":"1","title":"Dune","genre":"FICTION","pages":412,"author":{"name":"Frank Herbert"}}}}`

	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(httpc.CloseIdleConnections)
	body := []byte(`{"query":"query GetBook($id: ID!) { book(id: $id) { id title genre pages author { name } } }","operationName":"GetBook","variables":{"id":"1"}}`)
	ctx := context.Background()
	direct := func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer t")
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && string(got) != answer {
			err = fmt.Errorf("answer %s", got)
		}
		return err
	}
	req := &sdk.Request{Operation: sdk.Operation{Name: "get_book", Config: toolCfg}, Arguments: args}
	adapter := func() error {
		res, err := a.Invoke(ctx, req)
		if err == nil && string(res.Structured) != answer {
			err = fmt.Errorf("result %s", res.Structured)
		}
		return err
	}
	h := adaptertest.New(b, graphql.New())
	call := adaptertest.Call{Operation: "get_book", Config: json.RawMessage(toolCfg), Args: args}
	invoke := func() error {
		res, ue, err := h.Invoke(ctx, call)
		if err == nil && ue != nil {
			err = fmt.Errorf("upstream error %v", ue)
		}
		if err == nil && string(res.Structured) != answer {
			err = fmt.Errorf("result %s", res.Structured)
		}
		return err
	}

	p50 := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		call func() error
	}{{"direct", direct}, {"adapter", adapter}, {"invoke", invoke}} {
		b.Run(c.name, func(b *testing.B) {
			for range 20 { // warm up connections and caches
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
	if d := p50["direct"]; d > 0 && p50["adapter"] > 0 && p50["invoke"] > 0 {
		fmt.Printf("\nGraphQL query tool call vs a direct POST, same run (p50):\n"+
			"  direct POST        %9v\n"+
			"  adapter in-process %9v  (+%v, %.2fx)\n"+
			"  adapter over gRPC  %9v  (+%v, %.2fx)\n",
			d, p50["adapter"], p50["adapter"]-d, float64(p50["adapter"])/float64(d),
			p50["invoke"], p50["invoke"]-d, float64(p50["invoke"])/float64(d))
	}
}
