package rest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
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
