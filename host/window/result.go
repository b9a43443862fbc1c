package window

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Why a window ended (the result's end_reason).
const (
	EndWindowDuration  = "window_duration"
	EndMaxItems        = "max_items"
	EndMaxBytes        = "max_bytes"
	EndUpstreamTimeout = "upstream_timeout"
	EndIdleTimeout     = "idle_timeout"
	EndDone            = "done"
	EndUpstreamEnd     = "upstream_end"
	EndUpstreamError   = "upstream_error"
	EndCancelled       = "cancelled"
)

// Result is a window's structuredContent (OutputSchema describes it).
type Result struct {
	Items          []json.RawMessage `json:"items"`
	Summary        any               `json:"summary"`
	Stats          Stats             `json:"stats"`
	Truncated      bool              `json:"truncated"`
	WindowComplete bool              `json:"window_complete"`
	HasMore        bool              `json:"has_more"`
	Cursor         string            `json:"cursor,omitempty"`
	EndReason      string            `json:"end_reason"`
	Status         json.RawMessage   `json:"status,omitempty"`
	Gaps           []string          `json:"gaps,omitempty"`
	Partial        []string          `json:"partial,omitempty"`
	Error          string            `json:"error,omitempty"`
}

// Result is the window's result: it ended for end (the collector's own
// reason wins when it stopped the window), failure says why the upstream
// failed ("" when it did not), cursor is where the next window starts as
// the caller hands it out (sealed), took how long the window ran.
func (c *Collector) Result(cursor, end, failure string, took time.Duration) *Result {
	if c.end != "" && (end == "" || end == c.end) {
		end = c.end
	}
	r := &Result{
		Items:     c.agg.items(),
		Summary:   c.agg.summary(c),
		Stats:     c.stats,
		Cursor:    cursor,
		EndReason: end,
		Status:    c.status,
		Gaps:      c.gaps,
		Partial:   c.partials,
		Error:     failure,
	}
	if r.Items == nil {
		r.Items = []json.RawMessage{}
	}
	r.Stats.Returned = len(r.Items)
	r.Stats.DurationMS = took.Milliseconds()
	switch end {
	case EndWindowDuration, EndDone, EndUpstreamEnd:
		r.WindowComplete = true
	}
	// has_more only with a cursor that continues (Continues): a window
	// that cannot continue says so in its tool's schema instead.
	r.HasMore = cursor != "" && end != EndDone && end != EndUpstreamEnd
	r.Truncated = end == EndMaxItems || end == EndMaxBytes || c.stats.SkippedOversize > 0 ||
		c.stats.FieldsTruncated > 0 || c.nGaps > 0
	if c.nGaps > len(c.gaps) {
		r.Gaps = append(r.Gaps, fmt.Sprintf("... and %d more", c.nGaps-len(c.gaps)))
	}
	if c.stats.Partial > len(c.partials) {
		r.Partial = append(r.Partial, fmt.Sprintf("... and %d more", c.stats.Partial-len(c.partials)))
	}
	return r
}

// Text is a text window's joined text (aggregation_mode text); ok is
// false for the other modes.
func (r *Result) Text() (text string, ok bool) {
	ts, ok := r.Summary.(textSummary)
	return ts.Text, ok
}

// Encode renders the result in a buffer sized for it up front (the
// items' bytes plus room for the rest), so building a result of
// max_bytes does not double its buffer.
func (r *Result) Encode() []byte {
	b := bytes.NewBuffer(make([]byte, 0, r.Stats.Bytes+int64(len(r.Items))+16<<10))
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return []byte(`{"error":"the window result could not be encoded"}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
