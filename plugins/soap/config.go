package soap

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/loopback"
	"github.com/crankmcp/crank/plugins/soap/wsse"
)

// config is an operation's soap config. Decoding, unknown fields and the
// published schema come from it (sdk.Config); prepare checks the values
// and loads the WSDL.
type config struct {
	WSDL             string            `reach:"file" json:"wsdl" jsonschema:"WSDL 1.1 file, relative to the operations file."`
	Service          string            `json:"service,omitempty" jsonschema:"The wsdl:service; default: any."`
	Port             string            `json:"port,omitempty" jsonschema:"The wsdl:port; default: the first SOAP 1.1 or 1.2 port."`
	Endpoint         string            `reach:"upstream" json:"endpoint,omitempty" jsonschema:"Overrides the port's soap:address."`
	Operation        string            `json:"operation,omitempty" jsonschema:"The entry is this one operation's tool."`
	Operations       []string          `json:"operations,omitempty" jsonschema:"Import only these operations of the port."`
	ToolPrefix       string            `json:"tool_prefix,omitempty" jsonschema:"Prefix of the derived tool names."`
	Headers          map[string]string `json:"headers,omitempty" jsonschema:"Extra HTTP headers (not Content-Length, Connection, SOAPAction...)."`
	Security         *security         `json:"security,omitempty" jsonschema:"WS-Security header sent with every call: a UsernameToken (password as text or digest) and a Timestamp."`
	Timeout          sdk.Duration      `json:"timeout,omitempty" default:"30s" jsonschema:"Per-call timeout as a Go duration; the host's operation timeout wins when set."`
	MaxResponseBytes int64             `json:"max_response_bytes,omitempty" default:"8388608" zero:"default" minimum:"0" jsonschema:"Largest accepted answer body; 0 means the default."`
}

type security struct {
	Username     string       `json:"username" jsonschema:"The UsernameToken's username."`
	Password     string       `json:"password,omitempty" jsonschema:"The UsernameToken's password, from a placeholder; never logged."`
	PasswordType string       `json:"password_type,omitempty" enum:"text,digest" default:"digest" jsonschema:"How the password travels: digest (PasswordDigest, Base64(SHA-1(nonce + created + password)), with a Nonce and Created: the password itself never travels) or text (PasswordText: only over https, or http to loopback)."`
	Nonce        bool         `json:"nonce,omitempty" jsonschema:"A text token carries a fresh Nonce and Created too (a digest token always does)."`
	Timestamp    sdk.Duration `json:"timestamp,omitempty" jsonschema:"Adds a wsu:Timestamp that expires this long after the call (a Go duration, e.g. 5m, at most 24h); absent: none."`
	Sign         *signFields  `json:"sign,omitempty" jsonschema:"Signs the Body and the Timestamp with an X.509 key (XML-DSig: exclusive c14n, SHA-256, RSA or ECDSA P-256)."`
}

// signFields name the signing certificate and key.
type signFields struct {
	CertFile string `reach:"file" json:"cert_file" jsonschema:"PEM certificate sent as the BinarySecurityToken, relative to the operations file."`
	KeyFile  string `reach:"file" json:"key_file" jsonschema:"PEM private key (RSA or ECDSA P-256) of the certificate; never logged."`
}

// maxTimestamp bounds security.timestamp.
const maxTimestamp = 24 * time.Hour

// token is the WS-Security header s asks for, signed by signer when set.
func (s *security) token(signer *wsse.Signer) *wsse.Token {
	if s == nil {
		return nil
	}
	return &wsse.Token{Username: s.Username, Password: s.Password, Digest: s.PasswordType == "digest",
		Nonce: s.Nonce, TTL: time.Duration(s.Timestamp), Signer: signer}
}

// loadSigner reads security.sign's certificate and key, relative to the
// operations file.
func loadSigner(op *sdk.Operation, f *signFields, d *sdk.Diagnostics) *wsse.Signer {
	switch {
	case f.CertFile == "":
		d.Errorf("security.sign.cert_file", "is required")
	case f.KeyFile == "":
		d.Errorf("security.sign.key_file", "is required")
	default:
		s, err := wsse.LoadSigner(op.ResolvePath(f.CertFile), op.ResolvePath(f.KeyFile))
		if err != nil {
			d.Errorf("security.sign", "%v", err)
			return nil
		}
		return s
	}
	return nil
}

// newConfigs returns the config declaration of one adapter, with its cache
// of loaded configs.
func newConfigs() *sdk.Config[config, *loaded] {
	return &sdk.Config[config, *loaded]{Name: Name, Prepare: prepare}
}

// checkConfig checks a decoded config's values; diagnostics name the
// field and never quote values.
func checkConfig(c *config, d *sdk.Diagnostics) {
	if c.WSDL == "" {
		d.Errorf("wsdl", "is required")
	} else if u, err := url.Parse(c.WSDL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		d.Errorf("wsdl", "must be a local file (fetching WSDLs over HTTP is not supported)")
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.Errorf("endpoint", "must be an absolute http or https URL")
		}
	}
	keys := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(c.Headers[k], "\r\n") {
			d.KeyErrorf("headers", k, "is not a valid header")
		} else if lk == "content-length" || lk == "transfer-encoding" || lk == "connection" || lk == "soapaction" {
			d.KeyErrorf("headers", k, "is set by the adapter")
		}
	}
	if c.Security != nil && c.Security.Username == "" {
		d.Errorf("security.username", "is required")
	}
	if c.Security != nil && (c.Security.Timestamp < 0 || time.Duration(c.Security.Timestamp) > maxTimestamp) {
		d.Errorf("security.timestamp", "must be from 0 to %s", maxTimestamp)
	}
	if c.Operation != "" && len(c.Operations) > 0 {
		d.Errorf("operations", "cannot be combined with operation")
	}
}

// loaded is a config with its WSDL read and its operations resolved.
type loaded struct {
	stamps  []fileStamp
	checked atomic.Int64 // unix nanoseconds of the last change check
	cfg     *config
	signer  *wsse.Signer // security.sign's, nil without it
	ops     []*operation
	byName  map[string]*operation
	skipped []error
	port    string
}

// stale reports whether one of l's files changed since it was loaded:
// checked always when fresh is set (at load), else at most once a second.
func (l *loaded) stale(fresh bool) bool {
	now := time.Now().UnixNano()
	last := l.checked.Load()
	if !fresh && now-last < int64(time.Second) || !l.checked.CompareAndSwap(last, now) {
		return false
	}
	return changed(l.stamps)
}

// prepare checks a decoded config and loads its WSDL; the WSDL's problems
// are diagnostics on the field at fault.
func prepare(op *sdk.Operation, cfg *config, d *sdk.Diagnostics) *loaded {
	checkConfig(cfg, d)
	var signer *wsse.Signer
	if s := cfg.Security; s != nil && s.Sign != nil {
		signer = loadSigner(op, s.Sign, d)
	}
	if d.Failed() {
		return nil
	}
	l := load(op, cfg, d)
	l.signer = signer
	l.checked.Store(time.Now().UnixNano())
	return l
}

func load(op *sdk.Operation, cfg *config, d *sdk.Diagnostics) *loaded {
	path := op.ResolvePath(cfg.WSDL)
	set, err := loadWSDL(path)
	if err != nil {
		d.Errorf("wsdl", "%v", err)
		return &loaded{stamps: []fileStamp{stampOf(path)}}
	}
	pi, err := set.choosePort(cfg.Service, cfg.Port)
	if err != nil {
		field := "wsdl"
		if cfg.Port != "" {
			field = "port"
		} else if cfg.Service != "" {
			field = "service"
		}
		d.Errorf(field, "%v", err)
		return &loaded{stamps: set.stamps}
	}
	ops, skipped, err := set.operations(pi)
	if err != nil {
		d.Errorf("wsdl", "port %s: %v", pi.name, err)
		return &loaded{stamps: set.stamps}
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
		if s := cfg.Security; s != nil && s.PasswordType == "text" && s.Password != "" && !textPasswordSafe(o.Endpoint) {
			d.Errorf("security.password_type", "text sends the password itself, readable by anyone on the path of %s: use digest, or an https endpoint", redactURL(o.Endpoint))
			return l
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
		d.Errorf(field, "%s %s", n, reason)
	}
	if len(l.ops) == 0 && !d.Failed() {
		msg := "port " + pi.name + " has no usable operation"
		for _, e := range l.skipped {
			msg += "; " + e.Error()
		}
		d.Errorf("wsdl", "%s", msg)
	}
	return l
}

// textPasswordSafe reports whether a PasswordText token may travel to
// endpoint: over https, or over http to loopback.
func textPasswordSafe(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http" && loopback.Host(u.Hostname()))
}
