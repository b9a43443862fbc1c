package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// OpsCommand is the subcommand that manages operations catalogs through
// a running gateway's admin API.
const OpsCommand = "ops"

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  OpsCommand,
		Usage: opsUsage,
		Short: "Manages operations catalogs through the admin API of a running Crank",
		Long:  opsLong,
		Func:  runOps,
		Flags: opsFlags(),
	})
}

// opsFlags are the flags of crank ops.
func opsFlags() *flag.FlagSet {
	flags := flag.NewFlagSet(OpsCommand, flag.ContinueOnError)
	flags.String("address", "", "the admin API's address (default: Caddy's, localhost:2019, or $CRANK_ADMIN)")
	flags.String("message", "", "the change's message, kept with the new version")
	flags.String("operator", "", "your name, kept with the new version (default: $USER)")
	flags.String("args", "{}", "test: the arguments, a JSON object")
	flags.Int("polls", 0, "test: how many times a session is polled")
	flags.Bool("json", false, "print the admin API's JSON answers as they are")
	return flags
}

const opsUsage = "[--address <addr>] list [<catalog>] | get <catalog> [<operation>] | apply <catalog> <file> | validate <catalog> <file> | versions <catalog> | diff <catalog> [<from> [<to>]] | rollback <catalog> <version> | delete <catalog> [<operation>] | test <catalog> <operation> [--args <json>]"

const opsLong = `Manages the operations catalogs kept in etcd through the admin API of a
running Crank (docs/admin-api.md), for operators and CI:

  list                       the catalogs
  list <catalog>             its operations
  get <catalog> [<op>]       the catalog (or one operation) as an operations file
  apply <catalog> <file>     replace the catalog with an operations file (YAML or
                             JSON), creating it if needed; every replica serves it
  validate <catalog> <file>  check a file as apply would, without saving
  versions <catalog>         the version history
  diff <catalog> [<from> [<to>]]  what changed between two versions
  rollback <catalog> <v>     a new version whose content is version v's
  delete <catalog> [<op>]    delete an operation, or the whole catalog (a version)
  test <catalog> <op>        run a saved operation without publishing anything

A change applies to the version just read (If-Match): when someone else
changed the catalog meanwhile, it fails with 409 and nothing is saved.
Problems are printed with the JSON pointer and line of the field.`

// opsClient talks to the admin API.
type opsClient struct {
	base     string
	operator string
	http     *http.Client
}

// opsError is an admin API failure as the CLI prints it.
type opsError struct {
	status int
	body   []byte
}

func (e *opsError) Error() string {
	var ae struct {
		Error    string `json:"error"`
		Problems []struct {
			Pointer string `json:"pointer"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		} `json:"errors"`
		Current *int64 `json:"current_version"`
	}
	if json.Unmarshal(e.body, &ae) != nil || ae.Error == "" {
		return fmt.Sprintf("HTTP %d: %s", e.status, strings.TrimSpace(string(e.body)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d: %s", e.status, ae.Error)
	for _, p := range ae.Problems {
		loc := p.Pointer
		if loc == "" {
			loc = "(document)"
		}
		if p.Line > 0 {
			loc = fmt.Sprintf("line %d: %s", p.Line, loc)
		}
		fmt.Fprintf(&b, "\n  %s: %s", loc, p.Message)
	}
	return b.String()
}

func (c *opsClient) do(method, path string, hdr http.Header, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Origin", c.base)
	if c.operator != "" {
		req.Header.Set("X-Crank-Operator", c.operator)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("the admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 300 {
		return resp, data, &opsError{status: resp.StatusCode, body: data}
	}
	return resp, data, nil
}

func runOps(fl caddycmd.Flags) (int, error) {
	out, err := opsMain(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	_, _ = os.Stdout.Write(out)
	return caddy.ExitCodeSuccess, nil
}

// opsMain runs crank ops and returns what to print.
func opsMain(fl caddycmd.Flags) ([]byte, error) {
	addr := fl.String("address")
	if addr == "" {
		addr = os.Getenv("CRANK_ADMIN")
	}
	if addr == "" {
		addr = caddy.DefaultAdminListen
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	operator := fl.String("operator")
	if operator == "" {
		operator = os.Getenv("USER")
	}
	c := &opsClient{base: strings.TrimRight(addr, "/"), operator: operator, http: &http.Client{Timeout: 6 * time.Minute}}
	args := fl.Args()
	if len(args) == 0 {
		return nil, errors.New("say what to do: list, get, apply, validate, versions, diff, rollback, delete or test (crank help ops)")
	}
	return c.run(args[0], args[1:], fl)
}

func needArgs(verb string, args []string, lo, hi int, usage string) error {
	if len(args) < lo || len(args) > hi {
		return fmt.Errorf("usage: crank ops %s %s", verb, usage)
	}
	return nil
}

func catalogPath(name string, rest ...string) string {
	p := "/crank/catalogs/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// run performs one verb and returns what to print.
func (c *opsClient) run(verb string, args []string, fl caddycmd.Flags) ([]byte, error) {
	q := url.Values{}
	if m := fl.String("message"); m != "" {
		q.Set("message", m)
	}
	withMsg := func(p string) string {
		if len(q) == 0 {
			return p
		}
		return p + "?" + q.Encode()
	}
	raw := fl.Bool("json")
	switch verb {
	case "list":
		if err := needArgs(verb, args, 0, 1, "[<catalog>]"); err != nil {
			return nil, err
		}
		if len(args) == 0 {
			_, body, err := c.do(http.MethodGet, "/crank/catalogs", nil, nil)
			if err != nil || raw {
				return body, err
			}
			var l struct {
				Catalogs []struct {
					Catalog    string `json:"catalog"`
					Version    int64  `json:"version"`
					Operations int    `json:"operations"`
					Deleted    bool   `json:"deleted"`
					Author     string `json:"author"`
				} `json:"catalogs"`
			}
			_ = json.Unmarshal(body, &l)
			var b bytes.Buffer
			for _, x := range l.Catalogs {
				state := fmt.Sprintf("%d operations", x.Operations)
				if x.Deleted {
					state = "deleted"
				}
				fmt.Fprintf(&b, "%s\tversion %d\t%s\tby %s\n", x.Catalog, x.Version, state, x.Author)
			}
			return b.Bytes(), nil
		}
		_, body, err := c.do(http.MethodGet, catalogPath(args[0], "operations"), nil, nil)
		if err != nil || raw {
			return body, err
		}
		var l struct {
			Operations []struct {
				Name    string `json:"name"`
				Adapter string `json:"adapter"`
				Mode    string `json:"mode"`
			} `json:"operations"`
		}
		_ = json.Unmarshal(body, &l)
		var b bytes.Buffer
		for _, o := range l.Operations {
			mode := o.Mode
			if mode == "" {
				mode = "unary"
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\n", o.Name, o.Adapter, mode)
		}
		return b.Bytes(), nil
	case "get":
		if err := needArgs(verb, args, 1, 2, "<catalog> [<operation>]"); err != nil {
			return nil, err
		}
		p := catalogPath(args[0])
		if len(args) == 2 {
			p = catalogPath(args[0], "operations", args[1])
		}
		if !raw {
			p += "?format=yaml"
		}
		_, body, err := c.do(http.MethodGet, p, nil, nil)
		return body, err
	case "apply", "validate":
		if err := needArgs(verb, args, 2, 2, "<catalog> <file>"); err != nil {
			return nil, err
		}
		file, err := os.ReadFile(args[1])
		if err != nil {
			return nil, err
		}
		if verb == "validate" {
			_, body, err := c.do(http.MethodPost, catalogPath(args[0], "validate"), nil, file)
			if err != nil || raw {
				return body, err
			}
			var v struct {
				Valid bool `json:"valid"`
			}
			_ = json.Unmarshal(body, &v)
			if !v.Valid {
				return nil, &opsError{status: http.StatusUnprocessableEntity, body: validationAsError(body, args[1])}
			}
			return []byte(args[1] + ": valid\n"), nil
		}
		hdr := http.Header{}
		resp, _, err := c.do(http.MethodGet, catalogPath(args[0], "operations"), nil, nil)
		var oe *opsError
		switch {
		case err == nil:
			hdr.Set("If-Match", resp.Header.Get("ETag"))
		case errors.As(err, &oe) && oe.status == http.StatusNotFound:
			hdr.Set("If-None-Match", "*")
		default:
			return nil, err
		}
		_, body, err := c.do(http.MethodPut, withMsg(catalogPath(args[0])), hdr, file)
		if err != nil || raw {
			return body, err
		}
		return summarizeWrite(body), nil
	case "versions":
		if err := needArgs(verb, args, 1, 1, "<catalog>"); err != nil {
			return nil, err
		}
		_, body, err := c.do(http.MethodGet, catalogPath(args[0], "versions"), nil, nil)
		if err != nil || raw {
			return body, err
		}
		var l struct {
			Versions []struct {
				Version    int64     `json:"version"`
				Time       time.Time `json:"time"`
				Author     string    `json:"author"`
				Operator   string    `json:"operator"`
				Action     string    `json:"action"`
				Message    string    `json:"message"`
				RollbackOf int64     `json:"rollback_of"`
				Operations int       `json:"operations"`
			} `json:"versions"`
		}
		_ = json.Unmarshal(body, &l)
		var b bytes.Buffer
		for _, v := range l.Versions {
			action := v.Action
			if v.RollbackOf > 0 {
				action = fmt.Sprintf("rollback to %d", v.RollbackOf)
			}
			fmt.Fprintf(&b, "%d\t%s\t%s (%s)\t%s\t%d operations\t%s\n", v.Version, v.Time.Format(time.RFC3339), v.Author, v.Operator,
				action, v.Operations, v.Message)
		}
		return b.Bytes(), nil
	case "diff":
		if err := needArgs(verb, args, 1, 3, "<catalog> [<from> [<to>]]"); err != nil {
			return nil, err
		}
		dq := url.Values{}
		if len(args) > 1 {
			dq.Set("from", args[1])
		}
		if len(args) > 2 {
			dq.Set("to", args[2])
		}
		_, body, err := c.do(http.MethodGet, catalogPath(args[0], "diff")+"?"+dq.Encode(), nil, nil)
		return body, err
	case "rollback":
		if err := needArgs(verb, args, 2, 2, "<catalog> <version>"); err != nil {
			return nil, err
		}
		resp, _, err := c.do(http.MethodGet, catalogPath(args[0], "operations"), nil, nil)
		if err != nil {
			return nil, err
		}
		hdr := http.Header{"If-Match": {resp.Header.Get("ETag")}}
		q.Set("version", args[1])
		_, body, err := c.do(http.MethodPost, withMsg(catalogPath(args[0], "rollback")), hdr, nil)
		if err != nil || raw {
			return body, err
		}
		return summarizeWrite(body), nil
	case "delete":
		if err := needArgs(verb, args, 1, 2, "<catalog> [<operation>]"); err != nil {
			return nil, err
		}
		resp, _, err := c.do(http.MethodGet, catalogPath(args[0], "operations"), nil, nil)
		if err != nil {
			return nil, err
		}
		hdr := http.Header{"If-Match": {resp.Header.Get("ETag")}}
		p := catalogPath(args[0])
		if len(args) == 2 {
			p = catalogPath(args[0], "operations", args[1])
		}
		_, body, err := c.do(http.MethodDelete, withMsg(p), hdr, nil)
		if err != nil || raw {
			return body, err
		}
		return summarizeWrite(body), nil
	case "test":
		if err := needArgs(verb, args, 2, 2, "<catalog> <operation> [--args <json>]"); err != nil {
			return nil, err
		}
		req := map[string]any{"operation": args[1], "arguments": json.RawMessage(fl.String("args"))}
		if n := fl.Int("polls"); n > 0 {
			req["polls"] = n
		}
		b, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("--args: not JSON: %w", err)
		}
		_, body, err := c.do(http.MethodPost, catalogPath(args[0], "test"), http.Header{"Content-Type": {"application/json"}}, b)
		return body, err
	}
	return nil, fmt.Errorf("unknown ops command %q: list, get, apply, validate, versions, diff, rollback, delete or test", verb)
}

// summarizeWrite prints a write's new version and changes.
func summarizeWrite(body []byte) []byte {
	var w struct {
		Catalog struct {
			Catalog string `json:"catalog"`
			Version int64  `json:"version"`
		} `json:"catalog"`
		Changes []struct {
			Operation string `json:"operation"`
			Change    string `json:"change"`
		} `json:"changes"`
		Warnings []struct {
			Pointer string `json:"pointer"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	if json.Unmarshal(body, &w) != nil {
		return body
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "catalog %s: version %d\n", w.Catalog.Catalog, w.Catalog.Version)
	for _, c := range w.Changes {
		fmt.Fprintf(&b, "  %s %s\n", c.Change, c.Operation)
	}
	for _, x := range w.Warnings {
		fmt.Fprintf(&b, "  warning: %s: %s\n", x.Pointer, x.Message)
	}
	return b.Bytes()
}

// validationAsError turns a validation answer into an error body.
func validationAsError(body []byte, file string) []byte {
	var v map[string]any
	_ = json.Unmarshal(body, &v)
	v["error"] = file + " does not load"
	out, _ := json.Marshal(v)
	return out
}
