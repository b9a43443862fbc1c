package grpcadapter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
)

type sdkKind = sdk.ErrorKind

const (
	kindUpstream    = sdk.KindUpstreamStatus
	kindTransport   = sdk.KindTransport
	kindTimeout     = sdk.KindTimeout
	kindCancelled   = sdk.KindCancelled
	kindInvalid     = sdk.KindInvalidArgument
	kindBadResponse = sdk.KindBadResponse
)

// errCallTimeout is the cancellation cause of a call whose own timeout
// expired, as opposed to the host cancelling it or its deadline passing.
var errCallTimeout = errors.New("grpc: call timeout")

// Bounds of what an error carries.
const (
	maxMessageBytes = 2 << 10
	maxDetailBytes  = 16 << 10
)

// codeNames are the canonical gRPC status code names.
var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

// callError turns the error of a call into an upstream error. parent is the
// host's context, call the context bounded by the call timeout (the same
// as parent for streams).
func callError(parent, call context.Context, c *config, m *methodInfo, timeout time.Duration, err error) *sdk.UpstreamError {
	st := status.Convert(err)
	ue := &sdk.UpstreamError{Upstream: c.upstream(), Status: codeName(st.Code())}
	msg := st.Message()
	if len(msg) > maxMessageBytes {
		// Never cut here, where the host could not redact a secret
		// the cut split: a long status message is the excerpt.
		ue.Body = sdk.Excerpt(parent, []byte(msg))
		msg = fmt.Sprintf("(a status message of %d bytes: see the upstream body)", len(msg))
	}
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		ue.Kind = kindCancelled
		ue.Status = codeName(codes.Canceled)
		ue.Message = "the call was cancelled"
		return ue
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		ue.Kind = kindTimeout
		ue.Status = codeName(codes.DeadlineExceeded)
		ue.Message = "DEADLINE_EXCEEDED: the call's deadline expired before the upstream answered"
		ue.Retryable = true
		return ue
	case call != nil && (errors.Is(context.Cause(call), errCallTimeout) || st.Code() == codes.DeadlineExceeded && nearDeadline(call)):
		// Our deadline travels to the server as grpc-timeout: the server's
		// timer may fire a moment before ours.
		ue.Kind = kindTimeout
		ue.Status = codeName(codes.DeadlineExceeded)
		ue.Message = "DEADLINE_EXCEEDED: the upstream did not answer within " + timeout.String()
		ue.Retryable = true
		return ue
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		ue.Kind = kindTimeout
		ue.Message = "DEADLINE_EXCEEDED: the upstream reported its deadline exceeded"
		if msg != "" {
			ue.Message += ": " + msg
		}
		ue.Retryable = true
	case codes.Unavailable:
		ue.Kind = kindTransport
		ue.Message = "UNAVAILABLE: " + transportReason(c, msg)
		// A connection the entry's egress rules refused stays refused.
		ue.Retryable = !strings.Contains(msg, egress.ErrRefused.Error())
	case codes.ResourceExhausted:
		if strings.HasPrefix(msg, "grpc: received message larger than max") ||
			strings.HasPrefix(msg, "grpc: received message after decompression larger than max") {
			ue.Kind = kindBadResponse
			ue.Message = fmt.Sprintf("the upstream's answer is larger than max_response_bytes (%d bytes)", c.maxBytes)
			return ue
		}
		ue.Kind = kindUpstream
		ue.Message = "RESOURCE_EXHAUSTED: " + orNoMessage(msg)
		ue.Retryable = true
	case codes.Internal:
		if strings.HasPrefix(msg, "grpc: failed to unmarshal the received message") {
			ue.Kind = kindBadResponse
			ue.Message = fmt.Sprintf("the upstream's answer is not a valid %s message: %s", m.out.FullName(), msg)
			return ue
		}
		ue.Kind = kindUpstream
		ue.Message = "INTERNAL: " + orNoMessage(msg)
	case codes.Unimplemented:
		ue.Kind = kindUpstream
		ue.Message = "UNIMPLEMENTED: " + orNoMessage(msg) + " (does the server serve " + c.fullMethod() + "? the descriptors may be stale)"
	case codes.Canceled:
		ue.Kind = kindUpstream
		ue.Message = "CANCELLED: the upstream cancelled the call: " + orNoMessage(msg)
	default:
		ue.Kind = kindUpstream
		ue.Message = ue.Status + ": " + orNoMessage(msg)
		ue.Retryable = st.Code() == codes.Aborted
	}
	ue.Rejected = rejected(st.Code())
	ue.Detail = statusDetail(st, m)
	return ue
}

// rejected reports whether a status refuses the call as such, so that
// repeating it cannot succeed (sdk.UpstreamError.Rejected).
func rejected(c codes.Code) bool {
	switch c {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// deadlineSlack is how close to a deadline a DEADLINE_EXCEEDED status
// counts as that deadline expiring.
const deadlineSlack = 100 * time.Millisecond

func nearDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < deadlineSlack
}

func orNoMessage(msg string) string {
	if msg == "" {
		return "(no message)"
	}
	return msg
}

// transportReason explains a connection failure from grpc's message,
// without the dial target's internals, with a hint for the usual mistakes.
func transportReason(c *config, msg string) string {
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(msg, egress.ErrRefused.Error()):
		return strings.ReplaceAll(strings.TrimRight(msg[strings.Index(msg, egress.ErrRefused.Error()):], `"`), `\"`, `"`)
	case strings.Contains(low, "connection refused"):
		return "cannot connect to " + c.target + ": connection refused"
	case strings.Contains(low, "no such host"), strings.Contains(low, "name resolver"), strings.Contains(low, "produced zero addresses"):
		return "cannot resolve " + c.target + ": DNS lookup failed"
	case strings.Contains(low, "first record does not look like a tls handshake"):
		return "TLS handshake with " + c.target + " failed: the server does not speak TLS (set plaintext: true)"
	case strings.Contains(low, "authentication handshake failed"), strings.Contains(low, "tls:"), strings.Contains(low, "x509:"):
		reason := msg
		if i := strings.Index(msg, "tls: "); i >= 0 {
			reason = msg[i:]
		} else if i := strings.Index(msg, "x509: "); i >= 0 {
			reason = msg[i:]
		}
		return "TLS handshake with " + c.target + " failed: " + strings.ReplaceAll(strings.TrimRight(reason, `"`), `\"`, `"`)
	case c.plaintext && (strings.Contains(low, "server preface") || strings.Contains(low, "eof") || strings.Contains(low, "frame too large")):
		return "the connection to " + c.target + " closed during the HTTP/2 handshake (does the server expect TLS? remove plaintext or set tls)"
	case strings.Contains(low, "connection reset"), strings.Contains(low, "broken pipe"):
		return "the connection to " + c.target + " was closed by the server"
	}
	return orNoMessage(msg)
}

// statusDetail renders a status as JSON: its code, message and details
// (google.rpc types and the service's own types by name; others as
// base64), bounded.
func statusDetail(st *status.Status, m *methodInfo) json.RawMessage {
	type detail = json.RawMessage
	out := struct {
		Code       string   `json:"code"`
		CodeNumber uint32   `json:"code_number"`
		Message    string   `json:"message,omitempty"`
		Details    []detail `json:"details,omitempty"`
		Truncated  bool     `json:"details_truncated,omitempty"`
	}{Code: codeName(st.Code()), CodeNumber: uint32(st.Code())}
	if len(st.Message()) <= maxMessageBytes {
		out.Message = st.Message() // a longer one is the error's body
	}
	mo := protojson.MarshalOptions{}
	if m != nil {
		mo.Resolver = m.set.types
		mo.UseProtoNames = !m.jsonNames
	}
	size := 0
	for _, a := range st.Proto().GetDetails() {
		b, err := mo.Marshal(a)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"@type": a.GetTypeUrl(), "value_base64": base64.StdEncoding.EncodeToString(a.GetValue())})
		}
		b = compactJSON(b)
		if size+len(b) > maxDetailBytes {
			out.Truncated = true
			break
		}
		size += len(b)
		out.Details = append(out.Details, b)
	}
	b, _ := json.Marshal(out)
	return b
}

// bounded cuts s to at most n bytes, on a rune boundary, with a note.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes cut)", len(s)-cut)
}
