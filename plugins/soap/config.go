package soap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// config is an operation's adapter config.
type config struct {
	WSDL             string            `json:"wsdl"`
	Service          string            `json:"service"`
	Port             string            `json:"port"`
	Endpoint         string            `json:"endpoint"`
	Operation        string            `json:"operation"`
	Operations       []string          `json:"operations"`
	ToolPrefix       string            `json:"tool_prefix"`
	Headers          map[string]string `json:"headers"`
	Security         *security         `json:"security"`
	Timeout          string            `json:"timeout"`
	MaxResponseBytes int64             `json:"max_response_bytes"`

	timeout time.Duration
}

type security struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

const (
	defaultTimeout  = 30 * time.Second
	defaultMaxBytes = 8 << 20
)

// parseConfig decodes and checks a config; diagnostics name the field and
// never quote values.
func parseConfig(raw json.RawMessage) (*config, []sdk.Diagnostic) {
	var c config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		field := ""
		msg := "config is not a valid object"
		if s := err.Error(); strings.Contains(s, "unknown field") {
			field = strings.Trim(s[strings.Index(s, "unknown field")+len("unknown field "):], `"`)
			msg = "unknown field"
		} else if te, ok := err.(*json.UnmarshalTypeError); ok {
			field, msg = te.Field, "has the wrong type (want "+te.Type.String()+")"
		}
		return nil, []sdk.Diagnostic{sdk.Errorf(field, "%s", msg)}
	}
	var d []sdk.Diagnostic
	if c.WSDL == "" {
		d = append(d, sdk.Errorf("wsdl", "is required"))
	} else if u, err := url.Parse(c.WSDL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		d = append(d, sdk.Errorf("wsdl", "must be a local file (fetching WSDLs over HTTP is not supported)"))
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d = append(d, sdk.Errorf("endpoint", "must be an absolute http or https URL"))
		}
	}
	for k, v := range c.Headers {
		lk := strings.ToLower(k)
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			d = append(d, sdk.Errorf("headers."+k, "is not a valid header"))
		} else if lk == "content-length" || lk == "transfer-encoding" || lk == "connection" || lk == "soapaction" {
			d = append(d, sdk.Errorf("headers."+k, "is set by the adapter"))
		}
	}
	if c.Security != nil && c.Security.Username == "" {
		d = append(d, sdk.Errorf("security.username", "is required"))
	}
	c.timeout = defaultTimeout
	if c.Timeout != "" {
		t, err := time.ParseDuration(c.Timeout)
		if err != nil || t <= 0 {
			d = append(d, sdk.Errorf("timeout", "must be a positive Go duration such as 10s"))
		}
		c.timeout = t
	}
	if c.MaxResponseBytes < 0 {
		d = append(d, sdk.Errorf("max_response_bytes", "must not be negative"))
	} else if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = defaultMaxBytes
	}
	if c.Operation != "" && len(c.Operations) > 0 {
		d = append(d, sdk.Errorf("operations", "cannot be combined with operation"))
	}
	if len(d) > 0 {
		return nil, d
	}
	return &c, nil
}

// loaded is a config with its WSDL read and its operations resolved.
type loaded struct {
	stamps  []fileStamp
	checked atomic.Int64 // unix nanoseconds of the last change check
	cfg     *config
	ops     []*operation
	byName  map[string]*operation
	skipped []error
	port    string
	diags   []sdk.Diagnostic
}

func load(raw json.RawMessage, baseDir string) *loaded {
	cfg, d := parseConfig(raw)
	if d != nil {
		return &loaded{diags: d}
	}
	op := sdk.Operation{BaseDir: baseDir}
	path := op.ResolvePath(cfg.WSDL)
	set, err := loadWSDL(path)
	if err != nil {
		return &loaded{diags: []sdk.Diagnostic{sdk.Errorf("wsdl", "%v", err)}, stamps: []fileStamp{stampOf(path)}}
	}
	pi, err := set.choosePort(cfg.Service, cfg.Port)
	if err != nil {
		field := "wsdl"
		if cfg.Port != "" {
			field = "port"
		} else if cfg.Service != "" {
			field = "service"
		}
		return &loaded{diags: []sdk.Diagnostic{sdk.Errorf(field, "%v", err)}}
	}
	ops, skipped, err := set.operations(pi)
	if err != nil {
		return &loaded{diags: []sdk.Diagnostic{sdk.Errorf("wsdl", "port %s: %v", pi.name, err)}}
	}
	l := &loaded{cfg: cfg, byName: map[string]*operation{}, skipped: skipped, port: pi.name, stamps: set.stamps}
	want := map[string]bool{}
	for _, n := range cfg.Operations {
		want[n] = true
	}
	if cfg.Operation != "" {
		want[cfg.Operation] = true
	}
	filter := len(want) > 0
	for _, o := range ops {
		if cfg.Endpoint != "" {
			o.Endpoint = cfg.Endpoint
		}
		if filter && !want[o.Name] {
			continue
		}
		if o.Endpoint == "" {
			l.skipped = append(l.skipped, fmt.Errorf("operation %s: port %s has no soap:address and no endpoint is configured", o.Name, pi.name))
			continue
		}
		l.ops = append(l.ops, o)
		l.byName[o.Name] = o
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	if filter {
		// Only the chosen operations' problems concern this entry.
		var kept []error
		for _, e := range l.skipped {
			for n := range want {
				if strings.Contains(e.Error(), `name="`+n+`"`) {
					kept = append(kept, e)
					break
				}
			}
		}
		l.skipped = kept
	}
	for _, n := range names {
		if l.byName[n] != nil {
			continue
		}
		field := "operations"
		if n == cfg.Operation {
			field = "operation"
		}
		reason := "is not an operation of port " + pi.name
		for _, e := range l.skipped {
			if strings.Contains(e.Error(), `name="`+n+`"`) {
				reason = "cannot be used: " + e.Error()
			}
		}
		l.diags = append(l.diags, sdk.Errorf(field, "%s %s", n, reason))
	}
	if len(l.ops) == 0 && len(l.diags) == 0 {
		msg := "port " + pi.name + " has no usable operation"
		for _, e := range l.skipped {
			msg += "; " + e.Error()
		}
		l.diags = append(l.diags, sdk.Errorf("wsdl", "%s", msg))
	}
	return l
}

// cache holds loaded configs by raw config and base directory.
type cache struct {
	mu sync.Mutex
	m  map[string]*loaded
}

// get returns the loaded config, reloading it when one of its files
// changed: always when fresh is set (at load), else at most once a second.
func (c *cache) get(raw json.RawMessage, baseDir string, fresh bool) *loaded {
	key := baseDir + "\x00" + string(raw)
	c.mu.Lock()
	l := c.m[key]
	c.mu.Unlock()
	if l != nil {
		now := time.Now().UnixNano()
		last := l.checked.Load()
		if !fresh && now-last < int64(time.Second) || !l.checked.CompareAndSwap(last, now) || !changed(l.stamps) {
			return l
		}
	}
	l = load(raw, baseDir)
	l.checked.Store(time.Now().UnixNano())
	c.mu.Lock()
	if c.m == nil || len(c.m) >= 256 {
		c.m = map[string]*loaded{}
	}
	c.m[key] = l
	c.mu.Unlock()
	return l
}
