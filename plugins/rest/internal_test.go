package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

func TestConfigCacheBounded(t *testing.T) {
	t.Parallel()
	c := newConfigs()
	c.Max = 3
	cfg := func(i int) *sdk.Operation {
		return &sdk.Operation{Config: fmt.Appendf(nil, `{"method":"GET","url":"http://h/%d"}`, i)}
	}
	first := c.Get(cfg(0))
	if c.Get(cfg(0)) != first {
		t.Fatal("a cached config was parsed again")
	}
	for i := 1; i < 10; i++ {
		c.Get(cfg(i))
		if n := c.Len(); n > 3 {
			t.Fatalf("cache holds %d configs, limit 3", n)
		}
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p := c.Get(cfg(i % 5)); p.Err() != nil || p.Value.op == nil {
				t.Errorf("config %d did not parse: %v", i%5, p.Err())
			}
		}()
	}
	wg.Wait()
}

func TestEscapeLiteral(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/plain/path":     "/plain/path",
		"/a b/%2F/ü":      "/a%20b/%2F/%C3%BC",
		"/x:y@z;a=b,c":    "/x:y@z;a=b,c",
		"/quote\"<>":      "/quote%22%3C%3E",
		"":                "",
		"a b?c":           "a%20b%3Fc",
		"/tab\there/done": "/tab%09here/done",
	} {
		if got := escapeLiteral(in, false); got != want {
			t.Errorf("escapeLiteral(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escapeLiteral("a=1&b=x y?", true); got != "a=1&b=x%20y?" {
		t.Errorf("query literal = %q", got)
	}
}

// A unary request without header_args or a body gets the operation's
// header built once, which neither the client nor the trace transport
// (adding the call's traceparent) nor concurrent calls modify.
func TestUnaryHeaderShared(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "k" || r.Header.Get("Accept") != "application/json" || r.Header.Get("Traceparent") == "" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	a := New().(*adapter)
	h := adaptertest.New(t, a)
	cfg := json.RawMessage(`{"method":"GET","url":"` + srv.URL + `/x","headers":{"X-Api-Key":"k"}}`)
	call := adaptertest.Call{Config: cfg, Context: sdk.RequestContext{
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", RecordSpans: true}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ue, err := h.Invoke(context.Background(), call); err != nil || ue != nil {
				t.Errorf("invoke: %v %v", err, ue)
			}
		}()
	}
	wg.Wait()
	op := a.configs.Get(&sdk.Operation{Config: cfg}).Value.op
	req, ue := op.newRequest(context.Background(), &callArgs{raw: emptyObject}, acceptJSON, nil)
	if ue != nil {
		t.Fatal(ue)
	}
	want := http.Header{"X-Api-Key": {"k"}, "Accept": {"application/json"}, "User-Agent": {userAgent}}
	if reflect.ValueOf(req.Header).UnsafePointer() != reflect.ValueOf(op.unaryHeader).UnsafePointer() || !reflect.DeepEqual(op.unaryHeader, want) {
		t.Errorf("header = %v (shared: %v), want %v", req.Header, reflect.ValueOf(req.Header).UnsafePointer() == reflect.ValueOf(op.unaryHeader).UnsafePointer(), want)
	}
}
