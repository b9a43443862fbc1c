package caddymodule

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
)

// TestCaddyfileErrors adapts bad Caddyfiles: each must fail with an error
// that names the offending thing and the line.
func TestCaddyfileErrors(t *testing.T) {
	site := func(body string) string { return ":8080 {\n" + body + "\n}\n" }
	global := func(body string) string { return "{\n" + body + "\n}\n\n:8080 {\n\tcrank /mcp ops.yaml\n}\n" }
	tests := []struct {
		name      string
		caddyfile string
		want      []string // substrings of the error
	}{
		{
			name:      "unknown subdirective",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tallowed_origin https://a.example\n\t}"),
			want:      []string{`unrecognized crank subdirective "allowed_origin"`, "Caddyfile:3"},
		},
		{
			name:      "missing operations file with a matcher",
			caddyfile: site("\tcrank /mcp"),
			want:      []string{"an operations file or a catalog is required", "Caddyfile:2"},
		},
		{
			name:      "missing operations file without a matcher",
			caddyfile: site("\tcrank"),
			want:      []string{"an operations file or a catalog is required"},
		},
		{
			name:      "missing operations file in a block",
			caddyfile: site("\tcrank /mcp {\n\t\tstateless\n\t}"),
			want:      []string{"an operations file or a catalog is required"},
		},
		{
			name:      "operations without its file",
			caddyfile: site("\tcrank /mcp {\n\t\toperations\n\t}"),
			want:      []string{"wrong argument count", "'operations'", "Caddyfile:3"},
		},
		{
			name:      "stateless takes no argument",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tstateless yes\n\t}"),
			want:      []string{"wrong argument count", "'yes'", "Caddyfile:3"},
		},
		{
			name:      "on_load_error takes retry or fail",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\ton_load_error skip\n\t}"),
			want:      []string{`on_load_error: must be retry or fail, got "skip"`, "Caddyfile:3"},
		},
		{
			name:      "on_load_error takes one value",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\ton_load_error\n\t}"),
			want:      []string{`on_load_error: want one value`, "Caddyfile:3"},
		},
		{
			name:      "hot_path is on or off",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\thot_path fast\n\t}"),
			want:      []string{`hot_path: must be on or off, got "fast"`, "Caddyfile:3"},
		},
		{
			name:      "json_response takes no argument",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tjson_response true\n\t}"),
			want:      []string{"wrong argument count", "'true'", "Caddyfile:3"},
		},
		{
			name:      "allowed_origins without origins",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tallowed_origins\n\t}"),
			want:      []string{"wrong argument count", "'allowed_origins'", "Caddyfile:3"},
		},
		{
			name:      "workspace with two ids",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tworkspace a b\n\t}"),
			want:      []string{"wrong argument count", "Caddyfile:3"},
		},
		{
			name:      "agent_header without a header",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tagent_header\n\t}"),
			want:      []string{"wrong argument count", "'agent_header'", "Caddyfile:3"},
		},
		{
			name:      "negative quota",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tquotas {\n\t\t\tmax_jobs_per_agent -1\n\t\t}\n\t}"),
			want:      []string{"quotas max_jobs_per_agent", `"-1"`, "Caddyfile:4"},
		},
		{
			name:      "quota size not a size",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tquotas {\n\t\t\tmax_retained_job_bytes_per_agent lots\n\t\t}\n\t}"),
			want:      []string{"quotas max_retained_job_bytes_per_agent: must be a size", `"lots"`, "Caddyfile:4"},
		},
		{
			name:      "unknown quota",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tquotas {\n\t\t\tmax_session_per_agent 1\n\t\t}\n\t}"),
			want:      []string{`unrecognized quotas option "max_session_per_agent"`, "Caddyfile:4"},
		},
		{
			name:      "bad session_timeout",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tsession_timeout soon\n\t}"),
			want:      []string{"session_timeout", `"soon"`, "Caddyfile:3"},
		},
		{
			name:      "session_timeout without a duration",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tsession_timeout\n\t}"),
			want:      []string{"wrong argument count", "'session_timeout'", "Caddyfile:3"},
		},
		{
			name:      "session_timeout with two durations",
			caddyfile: site("\tcrank /mcp ops.yaml {\n\t\tsession_timeout 1m 2m\n\t}"),
			want:      []string{"wrong argument count", "'2m'", "Caddyfile:3"},
		},
		{
			name: "etcd and embedded_etcd together",
			caddyfile: global("\tcrank {\n\t\tetcd {\n\t\t\tendpoints http://etcd:2379\n\t\t}\n" +
				"\t\tembedded_etcd {\n\t\t\tdata_dir /var/lib/crank\n\t\t}\n\t}"),
			want: []string{"etcd", "embedded_etcd", "not both"},
		},
		{
			name:      "unknown etcd option",
			caddyfile: global("\tcrank {\n\t\tetcd {\n\t\t\tendpoint http://etcd:2379\n\t\t}\n\t}"),
			want:      []string{`unrecognized etcd option "endpoint"`, "Caddyfile:4"},
		},
		{
			name:      "unknown embedded_etcd option",
			caddyfile: global("\tcrank {\n\t\tembedded_etcd {\n\t\t\tdatadir /tmp/x\n\t\t}\n\t}"),
			want:      []string{`unrecognized embedded_etcd option "datadir"`, "Caddyfile:4"},
		},
		{
			name:      "embedded_etcd quota_backend_bytes not a size",
			caddyfile: global("\tcrank {\n\t\tembedded_etcd {\n\t\t\tquota_backend_bytes lots\n\t\t}\n\t}"),
			want:      []string{"quota_backend_bytes", "positive size", `"lots"`, "Caddyfile:4"},
		},
		{
			name:      "embedded_etcd auto_compaction_retention not positive",
			caddyfile: global("\tcrank {\n\t\tembedded_etcd {\n\t\t\tauto_compaction_retention 0s\n\t\t}\n\t}"),
			want:      []string{"auto_compaction_retention", "must be positive", "Caddyfile:4"},
		},
		{
			name:      "unknown replica quota",
			caddyfile: global("\tcrank {\n\t\tquotas {\n\t\t\tmax_sessions_per_agent 1\n\t\t}\n\t}"),
			want:      []string{`unrecognized quotas option "max_sessions_per_agent"`, "Caddyfile:4"},
		},
		{
			name:      "unknown crank option",
			caddyfile: global("\tcrank {\n\t\tetcdd {\n\t\t}\n\t}"),
			want:      []string{`unrecognized crank option "etcdd"`, "Caddyfile:3"},
		},
		{
			name:      "crank option with an argument",
			caddyfile: global("\tcrank embedded"),
			want:      []string{"wrong argument count", "'embedded'", "Caddyfile:2"},
		},
		{
			name:      "etcd endpoints without a URL",
			caddyfile: global("\tcrank {\n\t\tetcd {\n\t\t\tendpoints\n\t\t}\n\t}"),
			want:      []string{"wrong argument count", "'endpoints'", "Caddyfile:4"},
		},
		{
			name:      "etcd prefix with two values",
			caddyfile: global("\tcrank {\n\t\tetcd {\n\t\t\tendpoints http://etcd:2379\n\t\t\tprefix /a /b\n\t\t}\n\t}"),
			want:      []string{"wrong argument count", "Caddyfile:5"},
		},
		{
			name:      "embedded_etcd data_dir without a directory",
			caddyfile: global("\tcrank {\n\t\tembedded_etcd {\n\t\t\tdata_dir\n\t\t}\n\t}"),
			want:      []string{"wrong argument count", "'data_dir'", "Caddyfile:4"},
		},
		{
			// The message names the bad value but not the option: see
			// TestCaddyfileDialTimeoutErrorNamesOption.
			name:      "bad etcd dial_timeout",
			caddyfile: global("\tcrank {\n\t\tetcd {\n\t\t\tendpoints http://etcd:2379\n\t\t\tdial_timeout 5xs\n\t\t}\n\t}"),
			want:      []string{"invalid duration", `"5xs"`, "Caddyfile:5"},
		},
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := adapter.Adapt([]byte(tc.caddyfile), nil)
			if err == nil {
				t.Fatalf("adapting succeeded (%s), want an error containing %q", out, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestCaddyfileDialTimeoutErrorNamesOption documents a bug: parseDuration
// (caddyfile.go) uses d.Val() as the option name, but after oneArg the
// cursor is on the value, so the message reads `5xs: invalid duration
// "5xs"` instead of naming dial_timeout.
func TestCaddyfileDialTimeoutErrorNamesOption(t *testing.T) {
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(
		"{\n\tcrank {\n\t\tetcd {\n\t\t\tendpoints http://etcd:2379\n\t\t\tdial_timeout 5xs\n\t\t}\n\t}\n}\n:8080\n"), nil)
	if err == nil {
		t.Fatal("adapting succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "dial_timeout") {
		t.Fatalf("the error does not name dial_timeout: %v", err)
	}
}

// TestHandlerUnmarshalCaddyfile checks the handler's parsing directly,
// including how repeated and overriding lines combine.
func TestHandlerUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Handler
	}{
		{
			name:  "positional file",
			input: `crank ops.yaml`,
			want:  Handler{Operations: []string{"ops.yaml"}},
		},
		{
			name:  "operations lines add to the positional files",
			input: "crank first.yaml other.yaml {\n\toperations second.yaml third.yaml\n}",
			want:  Handler{Operations: []string{"first.yaml", "other.yaml", "second.yaml", "third.yaml"}},
		},
		{
			name: "every subdirective",
			input: `crank {
				operations ops.yaml
				allowed_origins https://a.example http://b.example:8080
				allowed_origins *
				session_timeout 90s
				stateless
				json_response
				workspace ws-1
				agent_header X-Agent
				hot_path off
				on_load_error fail
			}`,
			want: Handler{
				Operations:      []string{"ops.yaml"},
				AllowedOrigins:  []string{"https://a.example", "http://b.example:8080", "*"},
				SessionTimeout:  caddy.Duration(90 * time.Second),
				Stateless:       true,
				JSONResponse:    true,
				Workspace:       "ws-1",
				AgentHeader:     "X-Agent",
				LoadConfig:      host.LoadConfig{OnLoadError: "fail"},
				TransportConfig: TransportConfig{HotPath: "off"},
			},
		},
		{
			name:  "caddy duration units",
			input: "crank ops.yaml {\n\tsession_timeout 1d\n}",
			want:  Handler{Operations: []string{"ops.yaml"}, SessionTimeout: caddy.Duration(24 * time.Hour)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, tc.want) {
				t.Errorf("got %+v\nwant %+v", h, tc.want)
			}
		})
	}
}

// TestAppUnmarshalCaddyfile checks the global option's parsing directly.
func TestAppUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  App
	}{
		{name: "bare option: embedded etcd with defaults", input: `crank`, want: App{}},
		{
			name: "external etcd",
			input: `crank {
				etcd {
					endpoints http://a:2379
					endpoints http://b:2379 http://c:2379
					prefix /p/
					dial_timeout 3s
					username u
					password {env.PW}
				}
			}`,
			want: App{Etcd: &EtcdConfig{
				Endpoints: []string{"http://a:2379", "http://b:2379", "http://c:2379"},
				Prefix:    "/p/", DialTimeout: caddy.Duration(3 * time.Second), Username: "u", Password: "{env.PW}",
			}},
		},
		{
			name: "embedded etcd",
			input: `crank {
				embedded_etcd {
					data_dir /var/lib/crank
					client_url http://127.0.0.1:1
					peer_url http://127.0.0.1:2
					prefix /q/
					quota_backend_bytes 512MiB
					auto_compaction_retention 1m
				}
			}`,
			want: App{EmbeddedEtcd: &EmbeddedEtcdConfig{
				DataDir: "/var/lib/crank", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2", Prefix: "/q/",
				QuotaBackendBytes: 512 << 20, AutoCompactionRetention: caddy.Duration(time.Minute),
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a App
			if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, tc.want) {
				got, _ := json.Marshal(a)
				want, _ := json.Marshal(tc.want)
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestCaddyfileRejectsNegativeSessionTimeout documents a gap: a negative
// session_timeout is accepted (here and in Handler.Provision, which only
// defaults 0). The go-sdk then never closes idle sessions (it only applies
// a positive timeout), and recordSession's PutMCPSession fails for every
// session ("TTL must be positive"), so no session reaches the store.
func TestCaddyfileRejectsNegativeSessionTimeout(t *testing.T) {
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(
		":8080 {\n\tcrank /mcp ops.yaml {\n\t\tsession_timeout -5m\n\t}\n}\n"), nil)
	if err == nil {
		t.Fatalf("session_timeout -5m is accepted: %s", out)
	}
	if !strings.Contains(err.Error(), "session_timeout") {
		t.Errorf("error %q does not name session_timeout", err)
	}
}
