package sdk_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk"
)

type route struct {
	Path   string `json:"path" jsonschema:"The route's path."`
	Weight int    `json:"weight,omitempty"`
}

type retry struct {
	Attempts int          `json:"attempts,omitempty"`
	Backoff  sdk.Duration `json:"backoff,omitempty"`
}

type common struct {
	Debug bool `json:"debug,omitempty"`
}

type testConfig struct {
	URL     string           `json:"url" jsonschema:"Where calls go."`
	Method  string           `json:"method,omitempty"`
	Timeout sdk.Duration     `json:"timeout,omitempty"`
	Limit   *int             `json:"limit,omitempty"`
	Small   int8             `json:"small,omitempty"`
	Count   uint16           `json:"count,omitempty"`
	Ratio   float64          `json:"ratio,omitempty"`
	Tags    []string         `json:"tags,omitempty"`
	Headers json.RawMessage  `json:"headers,omitempty" jsonschema:"Static headers."`
	Retry   *retry           `json:"retry,omitempty"`
	Routes  map[string]route `json:"routes,omitempty"`
	Steps   []route          `json:"steps,omitempty"`
	Extra   any              `json:"extra,omitempty"`
	Skipped string           `json:"-"`
	common
}

// prepared is what the test's Prepare builds: the decoded config and what
// it saw.
type prepared struct {
	cfg testConfig
	op  sdk.Operation
}

func newTestConfig(prepares *int) *sdk.Config[testConfig, *prepared] {
	var mu sync.Mutex
	return &sdk.Config[testConfig, *prepared]{
		Name: "test",
		Prepare: func(op *sdk.Operation, c *testConfig, d *sdk.Diagnostics) *prepared {
			if prepares != nil {
				mu.Lock()
				*prepares++
				mu.Unlock()
			}
			if c.URL == "" {
				d.Errorf("url", "required: where calls go")
			}
			if c.Tags != nil && len(c.Tags) == 0 {
				d.Errorf("tags", "must not be empty")
			}
			if c.Retry != nil && c.Retry.Attempts == 0 {
				d.Warnf("retry.attempts", "0 retries nothing")
			}
			if d.Failed() {
				return nil
			}
			return &prepared{cfg: *c, op: *op}
		},
		Keywords: map[string]string{
			"":             `{"minProperties": 1}`,
			"method":       `{"enum": ["GET", "POST"], "default": "GET"}`,
			"headers":      `{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}`,
			"routes.*":     `{"description": "A named route."}`,
			"steps.*.path": `{"pattern": "^/"}`,
		},
	}
}

func diagText(ds []sdk.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s: %s\n", d.Field, d.Message)
	}
	return b.String()
}

func TestConfigDecodes(t *testing.T) {
	t.Parallel()
	c := newTestConfig(nil)
	p := c.Get(&sdk.Operation{Name: "op", Timeout: time.Second, BaseDir: "/ops", Config: json.RawMessage(`{
		"url": "http://h/x", "method": "POST", "timeout": "1500ms", "limit": 0, "small": -5, "count": 7,
		"ratio": 0.5, "tags": ["a", "b"], "headers": {"X-A": 1}, "retry": {"attempts": 3, "backoff": "2s"},
		"routes": {"r": {"path": "/r", "weight": 2}}, "steps": [{"path": "/s"}, null], "extra": [1, "x"],
		"debug": true, "method": "GET"}`)})
	if p.Err() != nil || p.Diagnostics() != nil {
		t.Fatalf("diagnostics: %v", p.Diagnostics())
	}
	got := p.Value.cfg
	if got.URL != "http://h/x" || got.Method != "GET" || time.Duration(got.Timeout) != 1500*time.Millisecond ||
		got.Limit == nil || *got.Limit != 0 || got.Small != -5 || got.Count != 7 || got.Ratio != 0.5 ||
		strings.Join(got.Tags, ",") != "a,b" || string(got.Headers) != `{"X-A": 1}` ||
		got.Retry == nil || got.Retry.Attempts != 3 || time.Duration(got.Retry.Backoff) != 2*time.Second ||
		got.Routes["r"] != (route{Path: "/r", Weight: 2}) || len(got.Steps) != 2 || got.Steps[0].Path != "/s" ||
		got.Steps[1] != (route{}) || fmt.Sprint(got.Extra) != "[1 x]" || !got.Debug {
		t.Errorf("decoded: %+v", got)
	}
	// Prepare sees only what the cache is keyed by.
	if p.Value.op.Name != "" || p.Value.op.Timeout != 0 || p.Value.op.BaseDir != "/ops" || p.Value.op.ResolvePath("a") != "/ops/a" {
		t.Errorf("prepare saw %+v", p.Value.op)
	}

	// Absent and null fields stay zero; an empty list is not absent.
	p = c.Get(&sdk.Operation{Config: json.RawMessage(`{"url": "u", "limit": null, "retry": null, "tags": []}`)})
	if p.Value != nil || !strings.Contains(diagText(p.Diagnostics()), "tags: must not be empty") {
		t.Errorf("empty list: %s", diagText(p.Diagnostics()))
	}
	p = c.Get(&sdk.Operation{Config: json.RawMessage(`{"url": "u", "limit": null, "retry": null}`)})
	if p.Err() != nil || p.Value.cfg.Limit != nil || p.Value.cfg.Retry != nil || p.Value.cfg.Tags != nil {
		t.Errorf("nulls: %+v %v", p.Value, p.Err())
	}
}

func TestConfigNotAnObject(t *testing.T) {
	t.Parallel()
	prepares := 0
	c := newTestConfig(&prepares)
	for _, raw := range []string{`[1]`, `"x"`, `{"url": `} {
		p := c.Get(&sdk.Operation{Config: json.RawMessage(raw)})
		ds := p.Diagnostics()
		if len(ds) != 1 || ds[0].Field != "" || ds[0].Message != "the test adapter config must be a JSON object" || p.Value != nil {
			t.Errorf("%s: %s", raw, diagText(ds))
		}
		if p.Err() == nil || p.Err().Error() != "invalid test operation config: the test adapter config must be a JSON object" {
			t.Errorf("%s: err %v", raw, p.Err())
		}
	}
	if prepares != 0 {
		t.Errorf("prepare ran %d times on configs that are not objects", prepares)
	}
	// null and empty are {}: Prepare reports what is missing.
	for _, raw := range []string{``, ` null `, `{}`} {
		if got := diagText(c.Get(&sdk.Operation{Config: json.RawMessage(raw)}).Diagnostics()); got != "url: required: where calls go\n" {
			t.Errorf("%q: %s", raw, got)
		}
	}
}

func TestConfigUnknownFieldsAtEveryDepth(t *testing.T) {
	t.Parallel()
	c := newTestConfig(nil)
	p := c.Get(&sdk.Operation{Config: json.RawMessage(`{
		"url": "u", "URL": "v", "tgas": [], "zzz": 1, "debgu": true,
		"retry": {"atempts": 1, "backof": "1s"},
		"routes": {"a": {"path": "/a", "wieght": 1}},
		"steps": [{"path": "/s"}, {"pth": "/t", "qqqqqq": 2}],
		"headers": {"anything": "goes"}, "extra": {"free": "form"}}`)})
	want := []string{
		`URL: unknown field (did you mean "url"?)`,
		`debgu: unknown field (did you mean "debug"?)`,
		`tgas: unknown field (did you mean "tags"?)`,
		`zzz: unknown field (known fields: url, method, timeout, limit, small, count, ratio, tags, headers, retry, routes, steps, extra, debug)`,
		`retry.atempts: unknown field (did you mean "attempts"?)`,
		`retry.backof: unknown field (did you mean "backoff"?)`,
		`routes.a.wieght: unknown field (did you mean "weight"?)`,
		`steps[1].pth: unknown field (did you mean "path"?)`,
		`steps[1].qqqqqq: unknown field (known fields: path, weight)`,
		`retry.attempts: 0 retries nothing`,
	}
	if got := diagText(p.Diagnostics()); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if p.Value != nil || !strings.HasPrefix(p.Err().Error(), `invalid test operation config: URL: unknown field (did you mean "url"?); debgu:`) {
		t.Errorf("err = %v", p.Err())
	}
}

func TestConfigTypeErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t"
	c := newTestConfig(nil)
	for _, tc := range []struct{ config, want string }{
		{`{"url": 5}`, "url: must be a string, got a number"},
		{`{"url": "` + secret + `", "method": ["` + secret + `"]}`, "method: must be a string"},
		{`{"url": "u", "tags": "` + secret + `"}`, "tags: must be a list of strings, got a string"},
		{`{"url": "u", "tags": ["a", 1, {"x": "` + secret + `"}]}`, "tags[1]: must be a string, got a number\ntags[2]: must be a string, got an object"},
		{`{"url": "u", "limit": "` + secret + `"}`, "limit: must be an integer"},
		{`{"url": "u", "limit": 1.5}`, "limit: must be an integer"},
		{`{"url": "u", "limit": 1e3}`, "limit: must be an integer"},
		{`{"url": "u", "limit": 99999999999999999999}`, "limit: must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"url": "u", "small": 300}`, "small: must be an integer from -128 to 127"},
		{`{"url": "u", "count": -1}`, "count: must be an integer from 0 to 65535"},
		{`{"url": "u", "ratio": "1"}`, "ratio: must be a number"},
		{`{"url": "u", "debug": "yes"}`, "debug: must be a boolean, got a string"},
		{`{"url": "u", "retry": "` + secret + `"}`, "retry: must be an object {attempts, backoff}, got a string"},
		{`{"url": "u", "retry": {"attempts": true}}`, "retry.attempts: must be an integer"},
		{`{"url": "u", "routes": ["` + secret + `"]}`, "routes: must be an object"},
		{`{"url": "u", "routes": {"a": 1}}`, "routes.a: must be an object {path, weight}"},
		{`{"url": "u", "steps": {"path": "/"}}`, "steps: must be a list of objects"},
		{`{"url": "u", "steps": [{"path": 1}]}`, "steps[0].path: must be a string"},
		{`{"url": "u", "timeout": 10}`, `timeout: must be a Go duration string such as "10s" or "1500ms"`},
		{`{"url": "u", "timeout": "` + secret + `"}`, `timeout: not a valid duration: use a Go duration such as "10s" or "1500ms"`},
		{`{"url": "u", "timeout": "-1s"}`, "timeout: must be positive"},
		{`{"url": "u", "retry": {"backoff": "0s"}}`, "retry.backoff: must be positive\nretry.attempts: 0 retries nothing"},
		{`{"url": "u", "` + secret + `": "` + secret + `"}`, secret + ": unknown field (known fields: url,"},
	} {
		p := c.Get(&sdk.Operation{Config: json.RawMessage(tc.config)})
		got := diagText(p.Diagnostics())
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n%s\nwant %q", tc.config, got, tc.want)
		}
		if p.Err() == nil || p.Value != nil {
			t.Errorf("%s: loads", tc.config)
		}
		// A config value is never quoted (the unknown field's name is).
		if strings.Contains(strings.ReplaceAll(got, secret+": unknown field", ""), secret) {
			t.Errorf("%s: a value is quoted:\n%s", tc.config, got)
		}
	}
}

// A field of the wrong type is reported once, for its type: Prepare's
// diagnostics on it (it saw it zero) are dropped, the others are kept.
func TestConfigTypeErrorHidesPrepareDiagnostics(t *testing.T) {
	t.Parallel()
	c := newTestConfig(nil)
	p := c.Get(&sdk.Operation{Config: json.RawMessage(`{"url": 5, "tags": [], "retry": {"attempts": "x"}}`)})
	want := "url: must be a string, got a number\nretry.attempts: must be an integer, got a string\ntags: must not be empty\n"
	if got := diagText(p.Diagnostics()); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}

func TestConfigCache(t *testing.T) {
	t.Parallel()
	prepares := 0
	c := newTestConfig(&prepares)
	op := func(dir string, i int) *sdk.Operation {
		return &sdk.Operation{BaseDir: dir, Config: fmt.Appendf(nil, `{"url": "http://h/%d"}`, i)}
	}
	first := c.Get(op("/a", 0))
	if c.Get(op("/a", 0)) != first || prepares != 1 {
		t.Fatalf("a cached config was prepared again (%d)", prepares)
	}
	// The same config under another base directory is another config.
	other := c.Get(op("/b", 0))
	if other == first || other.Value.op.BaseDir != "/b" || c.Len() != 2 || c.Get(op("/a", 0)) != first {
		t.Fatalf("base directories share a prepared config")
	}
	// Fresh prepares again and replaces; Put stores a value.
	fresh := c.Fresh(op("/a", 0))
	if fresh == first || c.Get(op("/a", 0)) != fresh || c.Len() != 2 || prepares != 3 {
		t.Fatalf("Fresh: %p %p len %d prepares %d", fresh, first, c.Len(), prepares)
	}
	mine := &prepared{}
	c.Put(op("/a", 9), mine)
	if p := c.Get(op("/a", 9)); p.Value != mine || p.Diagnostics() != nil || p.Err() != nil || prepares != 3 {
		t.Fatalf("Put: %+v", p)
	}

	// Bounded: a full cache drops the least recently used config.
	var smallPrepares int
	small := newTestConfig(&smallPrepares)
	small.Max = 3
	kept := small.Get(op("/a", 0))
	for i := range 10 {
		small.Get(op("/a", i))
		small.Get(op("/a", 0))
		if small.Len() > 3 {
			t.Fatalf("cache holds %d configs, limit 3", small.Len())
		}
	}
	if small.Get(op("/a", 0)) != kept || smallPrepares != 10 {
		t.Fatalf("the config used all along was dropped (%d prepares)", smallPrepares)
	}

	// Concurrent calls share one prepared config.
	var wg sync.WaitGroup
	got := make([]*sdk.Prepared[*prepared], 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.Get(op("/c", i%4))
			if i%16 == 0 {
				c.Fresh(op("/d", i))
			}
		}()
	}
	wg.Wait()
	for i, p := range got {
		if p.Err() != nil || p.Value.cfg.URL != fmt.Sprintf("http://h/%d", i%4) {
			t.Fatalf("call %d: %+v", i, p)
		}
		if p != got[i%4] || p != c.Get(op("/c", i%4)) {
			t.Errorf("call %d got another prepared config than the cache holds", i)
		}
	}
}

func TestConfigSchema(t *testing.T) {
	t.Parallel()
	raw, err := newTestConfig(nil).Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Schema        string `json:"$schema"`
		Title         string
		Required      []string
		MinProperties int
		Additional    *bool `json:"additionalProperties"`
		Properties    map[string]any
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.Title != "test operation config" ||
		strings.Join(s.Required, ",") != "url" || s.MinProperties != 1 || s.Additional == nil || *s.Additional {
		t.Errorf("schema: %s", raw)
	}
	var names []string
	for n := range s.Properties {
		names = append(names, n)
	}
	if len(names) != 14 || s.Properties["Skipped"] != nil || s.Properties["debug"] == nil {
		t.Errorf("properties: %v", names)
	}
	for field, want := range map[string]string{
		"url":     `{"description":"Where calls go.","type":"string"}`,
		"method":  `{"default":"GET","enum":["GET","POST"],"type":"string"}`,
		"timeout": `{"type":"string"}`,
		"headers": `{"additionalProperties":{"type":["string","number","boolean"]},"description":"Static headers.","type":"object"}`,
		"routes":  `{"additionalProperties":{"additionalProperties":false,"description":"A named route.","properties":{"path":{"description":"The route's path.","type":"string"},"weight":{"type":"integer"}},"required":["path"],"type":"object"},"type":"object"}`,
		"steps":   `{"items":{"additionalProperties":false,"properties":{"path":{"description":"The route's path.","pattern":"^/","type":"string"},"weight":{"type":"integer"}},"required":["path"],"type":"object"},"type":"array"}`,
	} {
		if got, _ := json.Marshal(s.Properties[field]); string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", field, got, want)
		}
	}

	// A config the decoder takes is valid against the schema, and the
	// schema refuses what the decoder refuses.
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for cfg, ok := range map[string]bool{
		`{"url": "u", "timeout": "2s", "tags": ["a"], "headers": {"X": 1}, "retry": {"attempts": 2}, "routes": {"a": {"path": "/a"}}, "steps": [{"path": "/s"}], "debug": true}`: true,
		`{"url": "u", "retyr": {}}`:                    false,
		`{"url": "u", "retry": {"atempts": 1}}`:        false,
		`{"url": "u", "steps": [{"path": "s"}]}`:       false,
		`{"url": "u", "method": "PUT"}`:                false,
		`{"url": "u", "headers": {"X": [1]}}`:          false,
		`{"url": "u", "routes": {"a": {"wieght": 1}}}`: false,
	} {
		var v any
		if err := json.Unmarshal([]byte(cfg), &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); (err == nil) != ok {
			t.Errorf("%s: valid = %v, want %v (%v)", cfg, err == nil, ok, err)
		}
	}
}

func TestConfigSchemaErrors(t *testing.T) {
	t.Parallel()
	for path, kw := range map[string]string{
		"nope":         `{}`,
		"retry.nope":   `{}`,
		"url.*":        `{}`,
		"routes.*.zzz": `{}`,
		"url":          `[1]`,
	} {
		c := &sdk.Config[testConfig, int]{Name: "test", Keywords: map[string]string{path: kw}}
		if _, err := c.Schema(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", path)) {
			t.Errorf("%s: %v", path, err)
		}
	}
	type bad struct {
		C chan int `json:"c"`
	}
	if _, err := (&sdk.Config[bad, int]{}).Schema(); err == nil {
		t.Error("a channel field has a schema")
	}
}

// A reach tag marks its field's schema with x-crank-reach, at any depth:
// nested structs, pointers, lists and map values.
func TestConfigSchemaReach(t *testing.T) {
	t.Parallel()
	type target struct {
		Address string `reach:"upstream" json:"address"`
		Weight  int    `json:"weight,omitempty"`
	}
	type reaching struct {
		Command string            `reach:"command" json:"command,omitempty"`
		Spec    string            `reach:"location" json:"spec,omitempty"`
		Files   []string          `reach:"file" json:"files,omitempty"`
		TLS     *sdk.ClientTLS    `json:"tls,omitempty"`
		Targets []target          `json:"targets,omitempty"`
		Named   map[string]target `json:"named,omitempty"`
		Plain   string            `json:"plain,omitempty"`
	}
	raw, err := (&sdk.Config[reaching, int]{Name: "reach"}).Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) any {
		var v any = s
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return v.(map[string]any)[sdk.ReachKeyword]
	}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"properties", "command"}, "command"},
		{[]string{"properties", "spec"}, "location"},
		{[]string{"properties", "files"}, "file"},
		{[]string{"properties", "tls", "properties", "ca_file"}, "file"},
		{[]string{"properties", "tls", "properties", "key_file"}, "file"},
		{[]string{"properties", "tls", "properties", "server_name"}, nil},
		{[]string{"properties", "targets", "items", "properties", "address"}, "upstream"},
		{[]string{"properties", "named", "additionalProperties", "properties", "address"}, "upstream"},
		{[]string{"properties", "named", "additionalProperties", "properties", "weight"}, nil},
		{[]string{"properties", "plain"}, nil},
	} {
		if got := at(c.path...); got != c.want {
			t.Errorf("%v: %v, want %v (%s)", c.path, got, c.want, raw)
		}
	}
	type wrong struct {
		X string `reach:"network" json:"x"`
	}
	if _, err := (&sdk.Config[wrong, int]{}).Schema(); err == nil || !strings.Contains(err.Error(), `reach "network"`) {
		t.Errorf("an unknown reach: %v", err)
	}
}

func ExampleConfig() {
	// The config as operators write it: field names, descriptions and the
	// published schema come from here.
	type feedConfig struct {
		URL     string       `json:"url" jsonschema:"The feed's absolute http or https URL."`
		Timeout sdk.Duration `json:"timeout,omitempty" default:"10s" jsonschema:"Per-call timeout as a Go duration."`
		Tags    []string     `json:"tags,omitempty" jsonschema:"Keep only items with one of these tags."`
	}
	// What the calls use.
	type feed struct {
		url     string
		timeout time.Duration
		tags    []string
	}
	configs := &sdk.Config[feedConfig, *feed]{
		Name: "feed",
		Prepare: func(op *sdk.Operation, c *feedConfig, d *sdk.Diagnostics) *feed {
			if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
				d.Errorf("url", "required: an absolute http or https URL")
			}
			if d.Failed() {
				return nil
			}
			return &feed{url: c.URL, timeout: time.Duration(c.Timeout), tags: c.Tags}
		},
	}

	// In ValidateOperation: p.Diagnostics(); in Invoke: p.Err() or p.Value.
	p := configs.Get(&sdk.Operation{Config: json.RawMessage(`{"url": "https://feed.example", "timout": "5s", "tags": "news"}`)})
	for _, d := range p.Diagnostics() {
		fmt.Printf("%s: %s\n", d.Field, d.Message)
	}
	p = configs.Get(&sdk.Operation{Config: json.RawMessage(`{"url": "https://feed.example", "tags": ["news"]}`)})
	fmt.Println(p.Err(), p.Value.timeout)

	schema, _ := configs.Schema()
	fmt.Println(string(schema))
	// Output:
	// timout: unknown field (did you mean "timeout"?)
	// tags: must be a list of strings, got a string
	// <nil> 10s
	// {"type":"object","properties":{"url":{"type":"string","description":"The feed's absolute http or https URL."},"timeout":{"type":"string","description":"Per-call timeout as a Go duration.","default":"10s"},"tags":{"type":"array","items":{"type":"string"},"description":"Keep only items with one of these tags."}},"$schema":"https://json-schema.org/draft/2020-12/schema","title":"feed operation config","required":["url"],"additionalProperties":false}
}

// tagged is a config whose tags state defaults, bounds and enums.
type tagged struct {
	Mode    string       `json:"mode,omitempty" enum:"fast,slow" default:"fast"`
	Items   int          `json:"items,omitempty" minimum:"1" maximum:"100" default:"10"`
	Rate    float64      `json:"rate,omitempty" exclusiveMinimum:"0" maximum:"1" default:"1"`
	Floor   int64        `json:"floor,omitempty" minimum:"-5"`
	On      bool         `json:"on" default:"true"`
	Wait    sdk.Duration `json:"wait,omitempty" default:"30s"`
	Limits  taggedLimits `json:"limits,omitempty"`
	Pointer *int         `json:"pointer,omitempty" maximum:"3"`
	Size    int          `json:"size,omitempty" default:"64" zero:"default" minimum:"1"`
}

type taggedLimits struct {
	Bytes int `json:"bytes" default:"1024" maximum:"4096"`
}

// The tags give the decoded value of an absent field and refuse values
// outside their bounds, which then take the default; Decoded says what
// the config wrote.
func TestDecodeTags(t *testing.T) {
	t.Parallel()
	var v tagged
	dec, diags := sdk.Decode(json.RawMessage(`{"items": 5, "limits": null}`), &v)
	if diags != nil || v.Mode != "fast" || v.Items != 5 || v.Rate != 1 || !v.On || time.Duration(v.Wait) != 30*time.Second ||
		v.Limits.Bytes != 1024 || v.Pointer != nil {
		t.Errorf("defaults: %+v %v", v, diags)
	}
	if !dec.Has("/items") || dec.Has("/mode") || dec.Has("/limits") || dec.Has("/limits/bytes") {
		t.Errorf("written: items %v mode %v limits %v", dec.Has("/items"), dec.Has("/mode"), dec.Has("/limits"))
	}
	v = tagged{}
	dec, diags = sdk.Decode(json.RawMessage(`{"mode": "s3cr3t", "items": 0, "rate": 0, "floor": -6, "on": false,
		"limits": {"bytes": 5000}, "pointer": 4, "extra": 1}`), &v)
	want := "extra: unknown field (known fields: mode, items, rate, floor, on, wait, limits, pointer, size)\n" +
		"mode: must be one of fast, slow\n" +
		"items: must be from 1 to 100, got 0\n" +
		"rate: must be greater than 0 and at most 1, got 0\n" +
		"floor: must be at least -5, got -6\n" +
		"limits.bytes: must be at most 4096, got 5000\n" +
		"pointer: must be at most 3, got 4\n"
	if got := diagText(diags); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
	if v.Mode != "fast" || v.Items != 10 || v.Rate != 1 || v.Floor != 0 || v.On || v.Limits.Bytes != 1024 || v.Pointer != nil {
		t.Errorf("refused values take their defaults: %+v", v)
	}
	if !dec.Has("/limits/bytes") || !dec.Has("/on") || dec.Has("/rate/x") {
		t.Errorf("written: %v %v", dec.Has("/limits/bytes"), dec.Has("/on"))
	}
	// zero:"default": a written 0 is the default.
	v = tagged{}
	if dec, diags := sdk.Decode(json.RawMessage(`{"size": 0, "mode": ""}`), &v); diags != nil || v.Size != 64 || v.Mode != "fast" || dec.Has("/mode") {
		t.Errorf("a zero that means the default: %+v %v", v, diags)
	}
	// A value already there stays for an absent field (a preset laid under).
	v = tagged{Items: 50}
	if _, diags := sdk.Decode(nil, &v); diags != nil || v.Items != 50 || v.Mode != "fast" {
		t.Errorf("laid under: %+v %v", v, diags)
	}
	if _, diags := sdk.Decode(json.RawMessage(`[1]`), &v); diagText(diags) != ": must be an object {mode, items, rate, floor, on, wait, ...}, got a list\n" {
		t.Errorf("not an object: %s", diagText(diags))
	}
}

// The tags are the schema's keywords; a field with a default is not
// required.
func TestSchemaForTags(t *testing.T) {
	t.Parallel()
	raw, err := sdk.SchemaFor[tagged]("tagged", map[string]string{"limits": `{"title": "Limits"}`})
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	p := s.Properties
	if s.Title != "tagged" || len(s.Required) != 0 || string(p["mode"].Default) != `"fast"` || fmt.Sprint(p["mode"].Enum) != "[fast slow]" ||
		*p["items"].Minimum != 1 || *p["items"].Maximum != 100 || string(p["items"].Default) != "10" ||
		*p["rate"].ExclusiveMinimum != 0 || string(p["on"].Default) != "true" || string(p["wait"].Default) != `"30s"` ||
		p["limits"].Title != "Limits" || string(p["limits"].Properties["bytes"].Default) != "1024" || len(p["limits"].Required) != 0 {
		t.Errorf("schema: %s", raw)
	}
	type badDefault struct {
		N int `json:"n,omitempty" default:"many"`
	}
	if _, err := sdk.SchemaFor[badDefault]("", nil); err == nil || !strings.Contains(err.Error(), `field "n": default "many"`) {
		t.Errorf("a default of the wrong type: %v", err)
	}
}
