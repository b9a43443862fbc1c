package opsfile

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"

	"github.com/crankmcp/crank/host/redact"
)

// expandConfig expands placeholders in every string of a JSON config and
// records as secrets the values that replaced placeholders, except plain
// addresses (an absolute URL of a host alone, host:port), which error
// messages need to name the upstream; see secretsOf. A credential pair
// built from placeholders, an object's username and password or a URL's
// userinfo, is recorded as "username:password" too: adapters send it as
// Basic authorization, which the redactor recognises in base64.
func expandConfig(raw json.RawMessage, expand func(string) string, secrets map[string]bool) (json.RawMessage, error) {
	v, err := jsonpath.Decode(raw)
	if err != nil {
		return nil, err
	}
	// walk expands v and reports whether a placeholder expanded in it.
	var walk func(any) (any, bool)
	walk = func(v any) (any, bool) {
		switch t := v.(type) {
		case string:
			return expandString(t, expand, secrets)
		case map[string]any:
			exp, user, pass := false, false, false
			for k, e := range t {
				var x bool
				t[k], x = walk(e)
				exp = exp || x
				user = user || k == "username" && x
				pass = pass || k == "password" && x
			}
			u, uok := t["username"].(string)
			p, pok := t["password"].(string)
			if uok && pok && (user || pass) {
				addSecret(secrets, u+":"+p)
			}
			return t, exp
		case []any:
			exp := false
			for i, e := range t {
				var x bool
				t[i], x = walk(e)
				exp = exp || x
			}
			return t, exp
		}
		return v, false
	}
	v, _ = walk(v)
	return json.Marshal(v)
}

// placeholderRE matches a placeholder as Caddy's replacer reads one:
// {env.NAME}, {file./run/secrets/key}, or a brace expression the gateway
// leaves alone ({id} in a URL path).
var placeholderRE = regexp.MustCompile(`\{[A-Za-z_][^{}\s]*\}`)

// expandString expands s, records its secrets and reports whether a
// placeholder expanded in it.
func expandString(s string, expand func(string) string, secrets map[string]bool) (string, bool) {
	if !strings.Contains(s, "{") {
		return s, false
	}
	expanded := false
	for _, ph := range placeholderRE.FindAllString(s, -1) {
		if val := expand(ph); val != ph {
			expanded = true
			for _, sec := range secretsOf(val) {
				addSecret(secrets, sec)
			}
		}
	}
	out := expand(s)
	if expanded {
		// Credentials written around placeholders, as in
		// https://{env.USER}:{env.PASS}@host/.
		if u, err := url.Parse(out); err == nil && u.User != nil {
			for _, sec := range userinfoSecrets(u.User) {
				addSecret(secrets, sec)
			}
		}
	}
	return out, expanded
}

func addSecret(secrets map[string]bool, s string) {
	if len(s) >= redact.MinSecretLength {
		secrets[s] = true
	}
}

// secretsOf returns the secrets a placeholder's value stands for: none for
// a plain address (an absolute URL of a host alone, or host:port); for a
// URL with a path, query or userinfo (a capability URL, a ?key=) the URL,
// its path, long path segments, its query and long query values, its
// credentials, so that an upstream echoing one part does not leak it;
// otherwise the value itself.
func secretsOf(val string) []string {
	u, err := url.Parse(val)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		host, port, ok := strings.Cut(val, ":")
		if ok && host != "" && port != "" && !strings.ContainsAny(val, "/@ ") && strings.Trim(port, "0123456789") == "" {
			return nil // host:port
		}
		return []string{val}
	}
	if u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return nil // the address of a host
	}
	out := []string{val}
	if len(u.Path) >= minURLPathSecret {
		out = append(out, u.EscapedPath(), u.Path)
		for seg := range strings.SplitSeq(u.Path, "/") {
			if len(seg) >= minURLPathSecret {
				out = append(out, seg)
			}
		}
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
		q, _ := url.ParseQuery(u.RawQuery)
		for _, vs := range q {
			for _, v := range vs {
				if len(v) >= minURLValueSecret {
					out = append(out, v)
				}
			}
		}
	}
	if u.User != nil {
		out = append(out, userinfoSecrets(u.User)...)
	}
	return out
}

// The parts of a secret URL that are secrets of their own: a path, or a
// path segment, of at least minURLPathSecret bytes (a capability token),
// a query value of at least minURLValueSecret bytes (a key), so that
// plain words such as "/api", "services" or "json" are not redacted
// everywhere.
const (
	minURLPathSecret  = 16
	minURLValueSecret = 8
)

// userinfoSecrets returns the secrets of a URL's userinfo: as written,
// and "user:password" and the password decoded.
func userinfoSecrets(ui *url.Userinfo) []string {
	out := []string{ui.String()}
	if pw, ok := ui.Password(); ok {
		out = append(out, ui.Username()+":"+pw, pw)
	} else {
		out = append(out, ui.Username())
	}
	return out
}

var envRE = regexp.MustCompile(`\{env\.([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandEnv replaces {env.NAME} placeholders with environment variables (an
// unset variable expands to the empty string, as in Caddy) and leaves every
// other brace expression alone. The Caddy module uses Caddy's replacer
// instead, which knows more placeholders.
func ExpandEnv(s string) string {
	return envRE.ReplaceAllStringFunc(s, func(m string) string {
		return os.Getenv(m[len("{env.") : len(m)-1])
	})
}
