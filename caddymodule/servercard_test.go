package caddymodule

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/crankmcp/crank/host/servercard"
)

func adapt(t *testing.T, caddyfileText string) []byte {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServerJSON checks crank server-json's document of a config.
func TestServerJSON(t *testing.T) {
	t.Parallel()
	cfg := adapt(t, `mcp.example.com {
	route /team/* {
		crank operations.yaml {
			server_card {
				name        com.example/weather
				description "Forecasts and alerts."
				version     1.4.0
			}
			auth {
				resource https://mcp.example.com/team/mcp
				issuer   https://login.example.com
				scopes   mcp
			}
		}
	}
}
`)
	doc, err := serverJSON(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	remote := got["remotes"].([]any)[0].(map[string]any)
	if got["$schema"] != servercard.ServerJSONSchema || got["name"] != "com.example/weather" || got["version"] != "1.4.0" ||
		remote["url"] != "https://mcp.example.com/team/mcp" || remote["headers"] == nil {
		t.Errorf("server.json %s", doc)
	}
	if strings.Contains(string(doc), "operations.yaml") || strings.Contains(string(doc), "login.example.com") {
		t.Errorf("server.json names a file or an issuer: %s", doc)
	}

	if _, err := serverJSON(adapt(t, `http://127.0.0.1:8080 {
	crank operations.yaml {
		server_card {
			name        com.example/weather
			description "Forecasts."
		}
	}
}
`), ""); err == nil || !strings.Contains(err.Error(), "server_card.url is required") {
		t.Errorf("without a url: %v", err)
	}

	two := adapt(t, `http://127.0.0.1:8080 {
	crank /a/* /etc/crank/a.yaml {
		server_card {
			name com.example/a
			description A
			url http://127.0.0.1:8080/a/mcp
		}
	}
	crank /b/* /etc/crank/b.yaml {
		server_card {
			name com.example/b
			description B
			url http://127.0.0.1:8080/b/mcp
		}
	}
}
`)
	if _, err := serverJSON(two, ""); err == nil || !strings.Contains(err.Error(), "com.example/a, com.example/b") {
		t.Errorf("two names without --name: %v", err)
	}
	if doc, err := serverJSON(two, "com.example/b"); err != nil || !strings.Contains(string(doc), "http://127.0.0.1:8080/b/mcp") {
		t.Errorf("--name com.example/b: %v %s", err, doc)
	}
	if _, err := serverJSON(two, "com.example/c"); err == nil || !strings.Contains(err.Error(), `named "com.example/c"`) {
		t.Errorf("--name of none: %v", err)
	}
	if _, err := serverJSON(adapt(t, "http://127.0.0.1:8080 {\n\tcrank a.yaml\n}\n"), ""); err == nil ||
		!strings.Contains(err.Error(), "no crank endpoint") {
		t.Errorf("no card: %v", err)
	}
}

// TestServerCardFieldsDocumented holds the guide's server_card block (docs/guide/views-and-discovery.md) to
// servercard.Config: every field is there.
func TestServerCardFieldsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/guide/views-and-discovery.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\t\tserver_card {\n")
	sec, _, _ = strings.Cut(sec, "\t\t}\n")
	if !ok {
		t.Fatal("views-and-discovery.md has no server_card block")
	}
	for _, f := range servercard.Fields() {
		if !strings.Contains(sec, "\t\t\t"+f.Name+" ") {
			t.Errorf("views-and-discovery.md's server_card block does not show %s (%s)", f.Name, f.Doc)
		}
	}
}
