package mcpserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/servercard"
	"github.com/crankmcp/crank/internal/mcptest"
)

func TestServerCard(t *testing.T) {
	t.Parallel()
	rs, err := auth.NewResourceServer(auth.ResourceConfig{Resource: "https://mcp.example.com/team/mcp",
		Issuers: []auth.IssuerConfig{{Issuer: "https://login.example.com"}}, Scopes: []string{"mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		rs      *auth.ResourceServer
		url     string
		wantURL func(srv string) string
	}{
		{"from the request", nil, "", func(srv string) string { return srv + "/mcp" }},
		{"the configured url", nil, "https://mcp.example.com/mcp", func(string) string { return "https://mcp.example.com/mcp" }},
		{"the auth resource, without a token", rs, "", func(string) string { return "https://mcp.example.com/team/mcp" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := testOptions("default")
			opts.Auth = tc.rs
			opts.ServerCard = &servercard.Config{Name: "com.example/weather", Description: "Weather tools", URL: tc.url}
			ep, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ep.Attach(newTestHost(t, fmt.Sprintf(mcptest.UsersOps, "http://127.0.0.1:1"), nil, nil), nil)
			srv := httptest.NewServer(ep)
			t.Cleanup(func() { srv.Close(); _ = ep.Close() })
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp/server-card", nil)
			req.Header.Set("Origin", "https://elsewhere.example") // not an allowed origin: the card is public
			req.Header.Set("Accept", servercard.CardMediaType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != servercard.CardMediaType ||
				resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("%s %v %s", resp.Status, resp.Header, body)
			}
			var card struct {
				Name    string
				Version string
				Remotes []struct {
					URL                       string
					SupportedProtocolVersions []string
					Headers                   []struct{ Name string }
				}
			}
			if err := json.Unmarshal(body, &card); err != nil {
				t.Fatal(err)
			}
			r := card.Remotes[0]
			if card.Name != "com.example/weather" || card.Version != "test" || r.URL != tc.wantURL(srv.URL) ||
				len(r.SupportedProtocolVersions) < 2 || r.SupportedProtocolVersions[0] != "2026-07-28" ||
				(tc.rs != nil) != (len(r.Headers) == 1) {
				t.Errorf("card %s", body)
			}
			if strings.Contains(string(body), "users") || strings.Contains(string(body), "127.0.0.1:1") {
				t.Errorf("the card names a tool or an upstream: %s", body)
			}
		})
	}
}

func TestServerCardHostCheck(t *testing.T) {
	t.Parallel()
	opts := testOptions("default")
	opts.ServerCard = &servercard.Config{Name: "com.example/weather", Description: "Weather tools"}
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp/server-card", nil)
	req.Host = "evil.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "DNS rebinding") {
		t.Errorf("card with Host evil.example.com on a loopback listener: %s %s", resp.Status, body)
	}
	entries := []servercard.Entry{
		{Identifier: "urn:air:localhost:mcp:a", Type: servercard.CardMediaType, URL: "http://localhost:9/mcp/server-card"},
		{Identifier: "urn:air:other.example:mcp:b", Type: servercard.CardMediaType, URL: "https://other.example/mcp/server-card"},
	}
	cat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ep.ServeCatalog(w, r, entries) }))
	t.Cleanup(cat.Close)
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, cat.URL+servercard.CatalogPath, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := get("evil.example.com"); code != http.StatusForbidden {
		t.Errorf("catalog with Host evil.example.com: %d %s", code, body)
	}
	code, got := get("localhost:1234")
	if code != 200 || !strings.Contains(got, "urn:air:localhost:mcp:a") || strings.Contains(got, "other.example") {
		t.Errorf("catalog on localhost: %d %s", code, got)
	}
}
