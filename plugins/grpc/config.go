package grpcadapter

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/loopback"
)

// Bounds of what the adapter reads; the config's defaults and bounds are
// its fields' tags.
const (
	// maxFileBytes bounds a descriptor set or .proto file read at load.
	maxFileBytes = 64 << 20
	// maxToolPrefix bounds tool_prefix so derived names stay readable.
	maxToolPrefix = 64
)

// configFields is an operation's grpc config as written. Decoding, unknown
// fields and the published schema come from it (sdk.Config); prepare
// checks the values.
type configFields struct {
	Target           string          `reach:"upstream" json:"target" jsonschema:"Server address: host:port, dns:///host:port, passthrough:///host:port or unix:///path."`
	Plaintext        *bool           `json:"plaintext,omitempty" jsonschema:"Speak plaintext HTTP/2. Default: true for loopback and unix targets without tls, false otherwise."`
	TLS              *sdk.ClientTLS  `json:"tls,omitempty" jsonschema:"TLS settings; without ca_file the system roots verify the server."`
	Method           string          `json:"method,omitempty" jsonschema:"The method of a one-tool entry: package.Service/Method."`
	Service          string          `json:"service,omitempty" jsonschema:"A service whose methods all become tools: package.Service."`
	Methods          []string        `json:"methods,omitempty" jsonschema:"With service: only these methods (short names)."`
	ToolPrefix       *string         `json:"tool_prefix,omitempty" jsonschema:"With service: prefix of the derived tool names; default: the entry's name and an underscore."`
	DescriptorSet    string          `reach:"file" json:"descriptor_set,omitempty" jsonschema:"A binary FileDescriptorSet with the service's files and their imports; default: server reflection."`
	ProtoFiles       []string        `reach:"file" json:"proto_files,omitempty" jsonschema:".proto files compiled at load, named relative to import_paths."`
	ProtoSource      string          `json:"proto_source,omitempty" jsonschema:"The text of a .proto file compiled at load, instead of proto_files."`
	ImportPaths      []string        `reach:"file" json:"import_paths,omitempty" jsonschema:"Directories searched for proto_files (or proto_source's imports); default: the operations file's directory."`
	Metadata         json.RawMessage `json:"metadata,omitempty" jsonschema:"Request metadata sent with every call; -bin keys take base64 values."`
	Timeout          sdk.Duration    `json:"timeout,omitempty" default:"30s" jsonschema:"Per-call deadline as a Go duration; the host's operation timeout wins when set."`
	MaxResponseBytes int64           `json:"max_response_bytes,omitempty" default:"8388608" zero:"default" minimum:"0" maximum:"1073741824" jsonschema:"Largest accepted response message; 0 means the default."`
	FieldNames       string          `json:"field_names,omitempty" enum:"proto,json" default:"proto" jsonschema:"Argument and result field names: as in the .proto (proto) or lowerCamelCase (json)."`
	EmitDefaults     bool            `json:"emit_defaults,omitempty" default:"true" jsonschema:"Include fields at their default values (0, \"\", false, empty lists) in results."`
	CursorField      *string         `json:"cursor_field,omitempty" jsonschema:"The request field that receives a window's cursor when a window resumes."`
	Requests         requestLimits   `json:"requests,omitzero" jsonschema:"Client-streaming and bidirectional methods: bounds of the request messages one call sends."`
}

// requestLimits bound the request array of a client-streaming or
// bidirectional call, checked before anything is sent.
type requestLimits struct {
	MaxItems int64 `json:"max_items,omitempty" default:"100" zero:"default" minimum:"0" maximum:"10000" jsonschema:"Most request messages one call sends; 0 means the default."`
	MaxBytes int64 `json:"max_bytes,omitempty" default:"1048576" zero:"default" minimum:"0" maximum:"67108864" jsonschema:"Most bytes of request messages (their encoded sizes summed) one call sends; 0 means the default."`
}

// configKeywords state what the Go types of configFields cannot.
var configKeywords = map[string]string{
	"metadata": `{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}`,
}

// newConfigs returns the config declaration of one adapter, with its cache
// of prepared configs.
func newConfigs() *sdk.Config[configFields, *opState] {
	return &sdk.Config[configFields, *opState]{Name: Name, Prepare: prepare, Keywords: configKeywords}
}

// config is a parsed, validated operation config. It is immutable.
type config struct {
	target string
	// local is true for loopback and unix-socket targets.
	local     bool
	plaintext bool
	tls       *tls.Config // nil when plaintext
	// egress are the rules the connections are held to where dialled.
	egress *egress.Rules
	// connKey identifies the connection settings (target, transport
	// security and the content of the key material, egress rules), never
	// a secret.
	connKey string

	// service is the full service name; method the method's short name,
	// empty for a whole-service entry.
	service string
	method  string
	methods []string // whole-service entries: the methods to import
	prefix  string
	// hasPrefix reports whether tool_prefix was given (it may be "").
	hasPrefix bool

	descriptorSet string   // absolute path
	protoFiles    []string // names relative to importPaths
	protoSource   string   // an inline .proto file
	importPaths   []string // absolute paths

	// metadata is sent with every call: lower-case keys, values as sent.
	metadata []string // key, value, key, value...

	timeout   time.Duration // 0: unset
	maxBytes  int
	jsonNames bool
	emitDefs  bool
	// cursorField is the request field that receives a window's cursor.
	cursorField string
	// maxReqItems and maxReqBytes bound the request messages of a
	// client-streaming or bidirectional call.
	maxReqItems int
	maxReqBytes int
}

// fullMethod is "/package.Service/Method".
func (c *config) fullMethod() string { return "/" + c.service + "/" + c.method }

// upstream names the call in errors: method and target, never metadata.
func (c *config) upstream() string {
	if c.method == "" {
		return "gRPC " + c.service + " at " + c.target
	}
	return "gRPC " + c.service + "/" + c.method + " at " + c.target
}

// callTimeout is the effective per-call timeout: the host's wins, else
// the config's (its default when it sets none).
func (c *config) callTimeout(host time.Duration) time.Duration {
	if host > 0 {
		return host
	}
	return c.timeout
}

// schemaKey identifies where the descriptors come from.
func (c *config) schemaKey() string {
	switch {
	case c.descriptorSet != "":
		return "set\x00" + c.descriptorSet
	case len(c.protoFiles) > 0:
		return "proto\x00" + strings.Join(c.importPaths, "\x01") + "\x00" + strings.Join(c.protoFiles, "\x01")
	case c.protoSource != "":
		sum := sha256.Sum256([]byte(c.protoSource))
		return "source\x00" + strings.Join(c.importPaths, "\x01") + "\x00" + hex.EncodeToString(sum[:])
	}
	return "reflect\x00" + c.connKey
}

// diags collects a config's diagnostics.
type diags = sdk.Diagnostics

// prepare checks a decoded config; relative paths resolve against op's
// BaseDir. It reads the TLS files. Diagnostics never quote config values
// other than names (they may be secrets).
func prepare(op *sdk.Operation, f *configFields, d *diags) *opState {
	c := &config{egress: op.Egress, maxBytes: int(f.MaxResponseBytes), jsonNames: f.FieldNames == "json", emitDefs: f.EmitDefaults,
		maxReqItems: int(f.Requests.MaxItems), maxReqBytes: int(f.Requests.MaxBytes)}

	// target
	if f.Target == "" {
		d.Errorf("target", "required: the server address, e.g. 127.0.0.1:50051 or dns:///api.internal:443")
	} else {
		c.target = strings.TrimSpace(f.Target)
		c.local = parseTarget(c.target, d)
	}

	// plaintext and tls
	plaintext := f.Plaintext
	var tlsCfg *tls.Config
	tlsKey := ""
	tlsSet := f.TLS != nil
	if tlsSet {
		tlsCfg, tlsKey = f.TLS.Load(op, "tls", d)
	}
	switch {
	case plaintext != nil && *plaintext && tlsSet:
		d.Errorf("plaintext", "cannot be combined with tls: remove one of them")
	case plaintext != nil:
		c.plaintext = *plaintext
	default:
		c.plaintext = !tlsSet && c.local
	}
	if c.plaintext && !c.local && c.target != "" {
		d.Warnf("plaintext", "calls to a non-loopback target travel unencrypted, metadata included")
	}
	if !c.plaintext {
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = tlsCfg
	}
	mode := "plaintext"
	if !c.plaintext {
		mode = "tls\x00" + tlsKey
	}
	c.connKey = c.target + "\x00" + mode + op.Egress.Key()

	// method / service
	method, service := f.Method, f.Service
	if method != "" {
		if svc, m, ok := splitMethod(strings.TrimSpace(method)); !ok {
			d.Errorf("method", "must be a fully qualified method: package.Service/Method")
		} else {
			c.service, c.method = svc, m
		}
	}
	if service != "" {
		if service = strings.TrimPrefix(strings.TrimSpace(service), "."); !validFullName(service) {
			d.Errorf("service", "must be a fully qualified service name such as package.Service")
		} else if method != "" {
			d.Errorf("service", "give either method (one tool) or service (one tool per method), not both")
		} else {
			c.service = service
		}
	}
	if method == "" && service == "" {
		d.Errorf("method", "required: the method to call (package.Service/Method), or service to import every method of a service")
	}
	if f.Methods != nil {
		if service == "" {
			d.Errorf("methods", "only applies with service")
		} else {
			seen := map[string]bool{}
			for i, m := range f.Methods {
				m = strings.TrimSpace(m)
				switch {
				case !validIdent(m):
					d.Errorf(fmt.Sprintf("methods[%d]", i), "%q is not a method name (the short name, e.g. GetUser)", m)
				case seen[m]:
					d.Errorf(fmt.Sprintf("methods[%d]", i), "method %q is listed twice", m)
				default:
					seen[m] = true
					c.methods = append(c.methods, m)
				}
			}
		}
	}
	if p := f.ToolPrefix; p != nil {
		switch {
		case service == "":
			d.Errorf("tool_prefix", "only applies with service")
		case len(*p) > maxToolPrefix:
			d.Errorf("tool_prefix", "must be at most %d characters", maxToolPrefix)
		case !validToolChars(*p):
			d.Errorf("tool_prefix", "may only contain A-Z a-z 0-9 _ . -")
		default:
			c.prefix, c.hasPrefix = *p, true
		}
	}

	// descriptor sources
	if p := strings.TrimSpace(f.DescriptorSet); p != "" {
		c.descriptorSet = op.ResolvePath(p)
		checkReadable(c.descriptorSet, "descriptor_set", d)
	}
	if f.ProtoFiles != nil {
		if len(f.ProtoFiles) == 0 {
			d.Errorf("proto_files", "must be a non-empty list of .proto file names")
		} else if c.descriptorSet != "" {
			d.Errorf("proto_files", "give either descriptor_set or proto_files, not both")
		} else {
			for i, pf := range f.ProtoFiles {
				pf = strings.TrimSpace(pf)
				if pf == "" || !strings.HasSuffix(pf, ".proto") {
					d.Errorf(fmt.Sprintf("proto_files[%d]", i), "must be a .proto file name")
					continue
				}
				c.protoFiles = append(c.protoFiles, pf)
			}
		}
	}
	if src := f.ProtoSource; src != "" {
		switch {
		case strings.TrimSpace(src) == "":
			d.Errorf("proto_source", "must be the text of a .proto file")
		case c.descriptorSet != "" || len(c.protoFiles) > 0:
			d.Errorf("proto_source", "give one of descriptor_set, proto_files and proto_source")
		default:
			c.protoSource = src
		}
	}
	if f.ImportPaths != nil {
		if f.ProtoFiles == nil && c.protoSource == "" {
			d.Errorf("import_paths", "only applies with proto_files or proto_source")
		} else {
			for i, p := range f.ImportPaths {
				p = strings.TrimSpace(p)
				if p == "" {
					d.Errorf(fmt.Sprintf("import_paths[%d]", i), "must not be empty")
					continue
				}
				abs := op.ResolvePath(p)
				if st, err := os.Stat(abs); err != nil || !st.IsDir() {
					d.Errorf(fmt.Sprintf("import_paths[%d]", i), "%s is not a readable directory", p)
					continue
				}
				c.importPaths = append(c.importPaths, abs)
			}
		}
	}
	if (len(c.protoFiles) > 0 || c.protoSource != "") && len(c.importPaths) == 0 {
		// Default: the operations file's directory.
		c.importPaths = []string{op.ResolvePath(".")}
	}

	if f.Metadata != nil {
		c.metadata = parseMetadata(f.Metadata, d)
	}
	c.timeout = time.Duration(f.Timeout)

	// cursor_field
	if f.CursorField != nil {
		if c.cursorField = strings.TrimSpace(*f.CursorField); !validIdent(c.cursorField) {
			d.Errorf("cursor_field", "must be the name of a field of the request message")
		}
	}
	if d.Failed() {
		return nil
	}
	return &opState{cfg: c}
}

// parseTarget checks a gRPC target and reports whether it is local
// (loopback or a unix socket).
func parseTarget(t string, d *diags) bool {
	if t == "" {
		d.Errorf("target", "required: the server address, e.g. 127.0.0.1:50051")
		return false
	}
	if strings.ContainsAny(t, " \t\r\n") {
		d.Errorf("target", "must not contain spaces")
		return false
	}
	scheme, rest, hasScheme := strings.Cut(t, ":")
	switch {
	case hasScheme && (scheme == "unix" || scheme == "unix-abstract"):
		if strings.Trim(rest, "/") == "" {
			d.Errorf("target", "a unix target needs a socket path, e.g. unix:///run/api.sock")
		}
		return true
	case strings.Contains(t, "://"):
		scheme, rest, _ = strings.Cut(t, "://")
		if scheme != "dns" && scheme != "passthrough" {
			d.Errorf("target", "unsupported scheme %q: use host:port, dns:///host:port, passthrough:///host:port or unix:///path", scheme)
			return false
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i+1:] // drop the DNS authority
		}
		t = rest
	}
	host, port, err := net.SplitHostPort(t)
	if err != nil || host == "" {
		d.Errorf("target", "must be host:port, e.g. 127.0.0.1:50051 or api.internal:443")
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		d.Errorf("target", "the port must be a number from 1 to 65535")
		return false
	}
	return loopback.Host(host)
}

func checkReadable(path, field string, d *diags) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.Errorf(field, "cannot read %s: %v", path, err)
	case st.IsDir():
		d.Errorf(field, "%s is a directory, not a file", path)
	}
}

// reservedMetadata are keys gRPC or HTTP/2 manage.
var reservedMetadata = map[string]bool{
	"content-type": true, "te": true, "host": true, "user-agent": true, "connection": true,
	"keep-alive": true, "proxy-connection": true, "transfer-encoding": true, "upgrade": true,
	"traceparent": true, "tracestate": true,
}

func parseMetadata(v json.RawMessage, d *diags) []string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		d.Errorf("metadata", "must be an object {key: value}")
		return nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		key := strings.ToLower(k)
		switch {
		case !validMetadataKey(key):
			d.KeyErrorf("metadata", k, "not a valid metadata key (letters, digits, - _ . only)")
			continue
		case strings.HasPrefix(key, "grpc-") || reservedMetadata[key]:
			d.KeyErrorf("metadata", k, "%s is set by gRPC or the adapter and cannot be configured", key)
			continue
		case seen[key]:
			d.KeyErrorf("metadata", k, "key %s is set twice (metadata keys are case-insensitive)", key)
			continue
		}
		seen[key] = true
		value, ok := sdk.ScalarText(obj[k])
		if !ok {
			d.KeyErrorf("metadata", k, "value must be a string, number or boolean")
			continue
		}
		if strings.HasSuffix(key, "-bin") {
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				b, err = base64.RawStdEncoding.DecodeString(value)
			}
			if err != nil {
				d.KeyErrorf("metadata", k, "a -bin key's value must be base64")
				continue
			}
			value = string(b)
		} else if !printableASCII(value) {
			// Never echo the value: it is likely a secret.
			d.KeyErrorf("metadata", k, "value must be printable ASCII (use a -bin key for binary values)")
			continue
		}
		out = append(out, key, value)
	}
	return out
}

func validMetadataKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// splitMethod parses "pkg.Service/Method", "/pkg.Service/Method" or
// "pkg.Service.Method".
func splitMethod(s string) (service, method string, ok bool) {
	s = strings.TrimPrefix(s, "/")
	if svc, m, found := strings.Cut(s, "/"); found {
		service, method = svc, m
	} else if i := strings.LastIndexByte(s, '.'); i > 0 {
		service, method = s[:i], s[i+1:]
	}
	service = strings.TrimPrefix(service, ".")
	if !validFullName(service) || !validIdent(method) {
		return "", "", false
	}
	return service, method, true
}

func validFullName(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !validIdent(part) {
			return false
		}
	}
	return true
}

func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func validToolChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
