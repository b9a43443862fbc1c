package window

import (
	"encoding/json"
	"time"

	"github.com/crankmcp/crank/host/jsonpath"
)

// TransportBehavior says how a window operation reads its upstream.
type TransportBehavior string

// Transport behaviours.
const (
	// RequestResponse: the upstream answers requests; a window polls it
	// repeatedly (every poll_interval_ms, following cursor_path until
	// done_path).
	RequestResponse TransportBehavior = "request_response"
	// ServerStream: the upstream streams (SSE, gRPC server streaming); a
	// window reads the adapter's Stream until a limit ends it.
	ServerStream TransportBehavior = "server_stream"
)

// Aggregation modes of a window.
const (
	AggRawItems           = "raw_items"
	AggSummaryOnly        = "summary_only"
	AggSummaryPlusSamples = "summary_plus_samples"
	AggStats              = "stats"
	AggLatestState        = "latest_state"
	AggText               = "text"
)

// MaxItemsLimit is Limits.MaxItems' maximum, which bounds a window
// cursor's skip too.
const MaxItemsLimit = 1_000_000

// Limits bound a window. Durations are in milliseconds, as written.
type Limits struct {
	WindowDurationMS     int64 `json:"window_duration_ms,omitempty" default:"10000" minimum:"1" maximum:"600000" jsonschema:"How long a window collects, in ms (not for a session: its lifetime bounds its reader)."`
	PollIntervalMS       int64 `json:"poll_interval_ms,omitempty" default:"1000" minimum:"10" maximum:"600000" jsonschema:"request_response only: the pause between polls, in ms."`
	UpstreamTimeoutMS    int64 `json:"upstream_timeout_ms,omitempty" default:"10000" minimum:"1" maximum:"600000" jsonschema:"Bounds each upstream request (a poll, or a stream until the upstream answers), in ms."`
	IdleTimeoutMS        int64 `json:"idle_timeout_ms,omitempty" minimum:"0" maximum:"86400000" jsonschema:"A window: ends early after this long without an item (0 or none: never), shorter than window_duration_ms. A session: ends after this long without a poll (default 120000, at most max_session_lifetime_ms). In ms."`
	MaxSessionLifetimeMS int64 `json:"max_session_lifetime_ms,omitempty" default:"1800000" minimum:"1" maximum:"86400000" jsonschema:"A session only: it ends this long after its start, polled or not, in ms."`
	MaxItems             int   `json:"max_items,omitempty" default:"1000" minimum:"1" maximum:"1000000" jsonschema:"Items counted in a window (a session: its buffer in the store, at most 100000)."`
	MaxBytes             int64 `json:"max_bytes,omitempty" default:"1048576" minimum:"1" maximum:"33554432" jsonschema:"Bytes of items received (a session: its buffer's, and the largest item)."`
}

// Window is the window duration.
func (l Limits) Window() time.Duration { return ms(l.WindowDurationMS) }

// UpstreamTimeout bounds each upstream request (a poll, or a stream until
// the upstream answers).
func (l Limits) UpstreamTimeout() time.Duration { return ms(l.UpstreamTimeoutMS) }

// PollInterval is the pause between polls (request_response).
func (l Limits) PollInterval() time.Duration { return ms(l.PollIntervalMS) }

// Idle is the idle timeout: of a window without an item, of a session
// without a poll (0: none).
func (l Limits) Idle() time.Duration { return ms(l.IdleTimeoutMS) }

// Lifetime is a session's longest life.
func (l Limits) Lifetime() time.Duration { return ms(l.MaxSessionLifetimeMS) }

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Aggregation says how a window's items become its result. Paths are RFC
// 9535 JSONPath queries.
type Aggregation struct {
	Mode        string `json:"aggregation_mode,omitempty" enum:"raw_items,summary_only,summary_plus_samples,stats,latest_state,text" default:"raw_items" jsonschema:"What the result holds: every item (raw_items), counts (summary_only), counts and samples per group (summary_plus_samples), statistics of a value (stats), the last item per key (latest_state), or the items' text joined (text). A session: raw_items."`
	ItemsPath   string `json:"items_path,omitempty" jsonschema:"The items of one upstream document (one stream event's data, one poll answer); without it a JSON array is split into its elements and anything else is one item."`
	SummaryPath string `json:"summary_path,omitempty" jsonschema:"The upstream's own summary of a document, reported in summary.upstream."`
	CursorPath  string `json:"cursor_path,omitempty" jsonschema:"The cursor after a document (polls; a stream uses its event ids)."`
	StatusPath  string `json:"status_path,omitempty" jsonschema:"The upstream's status, reported as the result's status."`
	DonePath    string `json:"done_path,omitempty" jsonschema:"True ends the window (end_reason done)."`
	GroupBy     string `json:"group_by,omitempty" jsonschema:"Counts per value of this path (raw_items, summary_only, summary_plus_samples)."`
	SampleSize  int    `json:"sample_size,omitempty" default:"3" minimum:"1" maximum:"100" jsonschema:"summary_plus_samples: the items kept per group."`
	ValuePath   string `json:"value_path,omitempty" jsonschema:"stats: the numeric value (count, min, max, avg, p50, p95, sum by nearest rank)."`
	KeyPath     string `json:"key_path,omitempty" jsonschema:"latest_state: the key; the last item per key is kept."`
	TextPath    string `json:"text_path,omitempty" jsonschema:"text: each chunk's text, joined into summary.text."`
	FinishPath  string `json:"finish_reason_path,omitempty" jsonschema:"text: the finish reason."`
	UsagePath   string `json:"usage_path,omitempty" jsonschema:"text: the upstream's token usage."`
}

// Safety transforms every item before it leaves the adapter boundary.
type Safety struct {
	TruncateItemFields bool     `json:"truncate_item_fields" default:"true" jsonschema:"Cut strings longer than max_field_length, and mark them."`
	MaxFieldLength     int      `json:"max_field_length,omitempty" default:"4096" minimum:"16" maximum:"1048576" jsonschema:"With truncate_item_fields: the longest string kept whole, in bytes."`
	RedactedPaths      []string `json:"redacted_paths,omitempty" jsonschema:"JSONPath queries whose values are replaced by [REDACTED] in the document and each item, before anything is extracted, counted, sent as progress or logged."`
	DropDuplicates     bool     `json:"drop_duplicates" default:"false" jsonschema:"Drop items equal to an earlier one of the window."`
	SamplingRate       float64  `json:"sampling_rate" default:"1" exclusiveMinimum:"0" maximum:"1" jsonschema:"Keep floor(n*rate) of n items, evenly spaced."`
}

// Config is the validated config of a window (and of a session's
// upstream reader, or of the window an async_job collects): what the
// operations file makes of an entry's transport_behavior, limits,
// aggregation and safety, with its queries compiled.
type Config struct {
	TransportBehavior TransportBehavior `json:"transport_behavior"`
	Preset            string            `json:"preset,omitempty"`
	Limits            Limits            `json:"limits"`
	Aggregation       Aggregation       `json:"aggregation"`
	Safety            Safety            `json:"safety"`

	// Paths are the compiled queries of Aggregation and Safety.
	Paths Paths `json:"-"`
	// ItemSchema is the JSON Schema of one upstream item, when the
	// adapter derived one (ExpandOperation's Tool.item_schema_json).
	ItemSchema json.RawMessage `json:"-"`
	// Resumes says that the adapter resumes the operation's stream after
	// an item's id or cursor (its tool's sdk.Tool.ResumesStream).
	Resumes bool `json:"-"`
}

// Continues reports whether a window can return a cursor that continues
// it: its polls follow cursor_path, or its stream resumes after an
// item's position (Resumes). A text window never does: a reply is not
// resumed. A window that cannot continue returns no cursor, takes none,
// and says has_more false: its tool's description says each call is a
// fresh window.
func Continues(ex *Config) bool {
	switch {
	case ex.Aggregation.Mode == AggText:
		return false
	case ex.TransportBehavior == RequestResponse:
		return ex.Paths.Cursor != nil
	}
	return ex.Resumes
}

// HasMoreDescription is the description of a window result's has_more.
func HasMoreDescription(ex *Config) string {
	if Continues(ex) {
		return "More may follow after this window: pass cursor back as the cursor argument to get it."
	}
	return "Always false: this tool cannot continue a window (the upstream gives no position to resume from); call it again for a fresh window."
}

// Paths are a window's compiled queries, nil where the config sets none.
type Paths struct {
	Items, Summary, Cursor, Status, Done *jsonpath.Path
	GroupBy, Value, Key                  *jsonpath.Path
	Text, Finish, Usage                  *jsonpath.Path
	Redact                               []*jsonpath.Path
}
