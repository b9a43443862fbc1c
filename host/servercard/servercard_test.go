package servercard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/servercard"
)

func config() *servercard.Config {
	return &servercard.Config{Name: "com.example/weather", Description: "Weather tools", Title: "Weather",
		WebsiteURL: "https://example.com/weather"}
}

func endpoint() servercard.Endpoint {
	return servercard.Endpoint{URL: "https://mcp.example.com/mcp", Version: "0.1.0-dev",
		ProtocolVersions: []string{"2026-07-28", "2025-11-25"}}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return m
}

func TestCard(t *testing.T) {
	t.Parallel()
	ep := endpoint()
	got := decode(t, config().Card(ep))
	want := decode(t, []byte(`{
		"$schema": "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json",
		"name": "com.example/weather", "version": "0.1.0-dev", "description": "Weather tools", "title": "Weather",
		"websiteUrl": "https://example.com/weather",
		"remotes": [{"type": "streamable-http", "url": "https://mcp.example.com/mcp",
			"supportedProtocolVersions": ["2026-07-28", "2025-11-25"]}]}`))
	if a, b := mustJSON(got), mustJSON(want); a != b {
		t.Errorf("card:\n got %s\nwant %s", a, b)
	}

	ep.Auth = &servercard.Auth{MetadataURL: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp", Scopes: []string{"mcp"}}
	c := config()
	c.Version = "2.0.0"
	got = decode(t, c.Card(ep))
	if got["version"] != "2.0.0" {
		t.Errorf("version %v, want the config's", got["version"])
	}
	h := got["remotes"].([]any)[0].(map[string]any)["headers"].([]any)[0].(map[string]any)
	if h["name"] != "Authorization" || h["isRequired"] != true || h["isSecret"] != true ||
		!strings.Contains(h["description"].(string), ep.Auth.MetadataURL) {
		t.Errorf("auth header %v", h)
	}
	meta := got["_meta"].(map[string]any)[servercard.AuthMetaKey].(map[string]any)
	if meta["protectedResourceMetadata"] != ep.Auth.MetadataURL || meta["scheme"] != "oauth2" {
		t.Errorf("auth meta %v", meta)
	}
	for _, k := range []string{"tools", "resources", "prompts", "capabilities"} {
		if _, ok := got[k]; ok {
			t.Errorf("a card lists no primitives: has %q", k)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestServerJSONMeetsRegistrySchema checks server.json against what the
// registry's server.schema.json (2025-12-11) requires of it; the schema
// itself is not available offline.
func TestServerJSONMeetsRegistrySchema(t *testing.T) {
	t.Parallel()
	ep := endpoint()
	ep.Auth = &servercard.Auth{MetadataURL: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"}
	got := decode(t, config().ServerJSON(ep))
	allowed := []string{"$schema", "name", "description", "version", "title", "websiteUrl", "repository", "icons", "packages", "remotes", "_meta"}
	for k := range got {
		if !slices.Contains(allowed, k) {
			t.Errorf("member %q is not in server.json's schema", k)
		}
	}
	if got["$schema"] != servercard.ServerJSONSchema {
		t.Errorf("$schema %v", got["$schema"])
	}
	name, _ := got["name"].(string)
	if !regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`).MatchString(name) || len(name) < 3 || len(name) > 200 {
		t.Errorf("name %q does not match the schema's pattern", name)
	}
	if d, _ := got["description"].(string); d == "" || len(d) > 100 {
		t.Errorf("description %q: 1 to 100 characters", d)
	}
	if v, _ := got["version"].(string); v == "" || len(v) > 255 {
		t.Errorf("version %q", v)
	}
	remotes := got["remotes"].([]any)
	if len(remotes) != 1 {
		t.Fatalf("remotes %v", remotes)
	}
	r := remotes[0].(map[string]any)
	for k := range r {
		if !slices.Contains([]string{"type", "url", "headers", "variables"}, k) {
			t.Errorf("remote member %q is not in the schema's StreamableHttpTransport", k)
		}
	}
	if r["type"] != "streamable-http" || !regexp.MustCompile(`^https?://[^\s]+$`).MatchString(r["url"].(string)) {
		t.Errorf("remote %v", r)
	}
	for _, h := range r["headers"].([]any) {
		for k := range h.(map[string]any) {
			if !slices.Contains([]string{"name", "description", "isRequired", "isSecret", "format", "value", "default", "choices", "placeholder", "variables"}, k) {
				t.Errorf("header member %q is not in the schema's KeyValueInput", k)
			}
		}
	}
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	c := config()
	e, ok := c.Entry("https://mcp.example.com/mcp")
	if !ok {
		t.Fatal("a listed endpoint with a URL has an entry")
	}
	want := servercard.Entry{Identifier: "urn:air:mcp.example.com:mcp:weather", DisplayName: "Weather",
		Type: servercard.CardMediaType, URL: "https://mcp.example.com/mcp/server-card"}
	if e != want {
		t.Errorf("entry %+v, want %+v", e, want)
	}
	c.Identifier = "urn:air:example.com:mcp:forecast"
	if e, _ := c.Entry("https://mcp.example.com/mcp"); e.Identifier != c.Identifier {
		t.Errorf("identifier %q, want the config's", e.Identifier)
	}
	if _, ok := c.Entry(""); ok {
		t.Error("an endpoint without a known URL has no entry")
	}
	c.AICatalog = "off"
	if _, ok := c.Entry("https://mcp.example.com/mcp"); ok {
		t.Error("ai_catalog off: no entry")
	}
	got := decode(t, servercard.Catalog(nil))
	if got["specVersion"] != "1.0" || got["entries"] == nil || len(got["entries"].([]any)) != 0 {
		t.Errorf("empty catalog %v", got)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := config().Check("server_card"); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	for _, tc := range []struct {
		mutate func(*servercard.Config)
		want   string
	}{
		{func(c *servercard.Config) { c.Name = "" }, "server_card.name: required"},
		{func(c *servercard.Config) { c.Name = "weather" }, "server_card.name: must be namespace/name"},
		{func(c *servercard.Config) { c.Description = "" }, "server_card.description: required"},
		{func(c *servercard.Config) { c.Description = strings.Repeat("x", 101) }, "server_card.description: must be 1 to 100 characters, got 101"},
		{func(c *servercard.Config) { c.Version = "^1.2.0" }, "server_card.version: must be one version"},
		{func(c *servercard.Config) { c.URL = "http://mcp.example.com/mcp" }, "server_card.url: must be https (http only on loopback)"},
		{func(c *servercard.Config) { c.URL = "https://mcp.example.com/mcp?x=1" }, "server_card.url: must have no credentials"},
		{func(c *servercard.Config) { c.URL = "https://mcp.example.com/mcp/server-card" }, "server_card.url: is the endpoint's URL"},
		{func(c *servercard.Config) { c.URL = "/mcp" }, "server_card.url: must be an absolute https URL"},
		{func(c *servercard.Config) { c.WebsiteURL = "example.com" }, "server_card.website_url: must be an absolute"},
		{func(c *servercard.Config) { c.Identifier = "weather" }, "server_card.identifier: must be a URI or URN"},
		{func(c *servercard.Config) { c.AICatalog = "yes" }, "server_card.ai_catalog: must be on or off"},
	} {
		c := config()
		tc.mutate(c)
		err := c.Check("server_card")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", c, err, tc.want)
		}
	}
	c := config()
	c.URL = "http://127.0.0.1:8080/mcp"
	if err := c.Check("server_card"); err != nil {
		t.Errorf("http on loopback: %v", err)
	}
}

func TestFieldsAndSet(t *testing.T) {
	t.Parallel()
	var c servercard.Config
	for _, f := range servercard.Fields() {
		if f.Doc == "" {
			t.Errorf("field %s has no documentation", f.Name)
		}
		if !c.Set(f.Name, "v-"+f.Name) {
			t.Errorf("Set(%s) found no field", f.Name)
		}
	}
	if c.Name != "v-name" || c.AICatalog != "v-ai_catalog" || c.WebsiteURL != "v-website_url" {
		t.Errorf("Set: %+v", c)
	}
	if c.Set("tools", "x") {
		t.Error("Set of an unknown field")
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"a":1}`)
	serve := func(method string, hdr http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/mcp/server-card", nil)
		for k, v := range hdr {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		servercard.Serve(w, r, doc, servercard.CardMediaType)
		return w
	}
	w := serve(http.MethodGet, nil)
	tag := w.Header().Get("ETag")
	if w.Code != 200 || w.Body.String() != string(doc) || w.Header().Get("Content-Type") != servercard.CardMediaType ||
		w.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.HasPrefix(tag, `"`) {
		t.Fatalf("GET: %d %v %q", w.Code, w.Header(), w.Body)
	}
	for _, inm := range []string{tag, `"other", ` + tag, "W/" + tag, "*"} {
		if w := serve(http.MethodGet, http.Header{"If-None-Match": {inm}}); w.Code != http.StatusNotModified || w.Body.Len() != 0 ||
			w.Header().Get("ETag") != tag {
			t.Errorf("If-None-Match %s: %d %q", inm, w.Code, w.Body)
		}
	}
	if w := serve(http.MethodGet, http.Header{"If-None-Match": {`"other"`}}); w.Code != 200 {
		t.Errorf("another tag: %d", w.Code)
	}
	if w := serve(http.MethodHead, nil); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "7" {
		t.Errorf("HEAD: %d %v", w.Code, w.Header())
	}
	if w := serve(http.MethodOptions, http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"GET"}}); w.Code != http.StatusNoContent ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Methods"), "GET") || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d %v", w.Code, w.Header())
	}
	if w := serve(http.MethodPost, nil); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") == "" {
		t.Errorf("POST: %d", w.Code)
	}
}
