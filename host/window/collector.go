package window

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/redact"
)

// Collector turns the documents a window receives (stream events or poll
// answers) into its result. It applies the safety layer to every item,
// enforces max_items and max_bytes, tracks the cursor and aggregates. It
// is used by one goroutine.
type Collector struct {
	cfg      *Config
	p        *Paths
	progress func(chunk string)
	// redact are the call's redactors, applied to every string before
	// max_field_length cuts it (safety.go).
	redact redact.Chain

	// cursor is the upstream cursor after the last fully consumed
	// document; skip is how many items of the first document to skip
	// (the previous window stopped inside it).
	cursor string
	skip   int
	// partial is set when a limit stopped the window inside a document:
	// the next window starts at partialCursor and skips partialSkip items.
	partial       bool
	partialCursor string
	partialSkip   int

	stats    Stats
	end      string // set when the collector ended the window
	status   json.RawMessage
	upstream json.RawMessage
	gaps     []string
	nGaps    int
	// partials are why the first partial items were incomplete.
	partials []string

	dd  *dedupe
	smp sampler
	agg aggregator
	// sink and onGap are Options'.
	sink             func(raw []byte) bool
	onGap, onPartial func()
	// fast is true when items need no decoding: nothing reads inside them.
	fast bool
}

// Options tune a Collector.
type Options struct {
	// Redact are the call's redactors, applied to every string before
	// max_field_length cuts it.
	Redact redact.Chain
	// From is where the window starts.
	From Position
	// Progress, when set, receives each counted item's JSON (for
	// aggregation_mode text, the text as it grows), redacted by Redact
	// where the text aggregation holds a secret back.
	Progress func(chunk string)
	// Sink, when set, receives every kept item instead of the aggregator
	// (a session's reader): max_bytes then bounds one item only, and the
	// sink bounds the rest. It returns false to stop the collector.
	Sink func(raw []byte) bool
	// OnGap, when set, is told of every gap as it is recorded, and
	// OnPartial of every partial item.
	OnGap, OnPartial func()
}

// Stats are the counters of a window.
type Stats struct {
	Received          int `json:"received"`
	Counted           int `json:"counted"`
	Returned          int `json:"returned"`
	DroppedDuplicates int `json:"dropped_duplicates"`
	SampledOut        int `json:"sampled_out"`
	SkippedOversize   int `json:"skipped_oversize"`
	FieldsTruncated   int `json:"fields_truncated"`
	Redacted          int `json:"redacted"`
	// Partial counts the items the upstream delivered incomplete
	// (sdk.Item.Partial): counted as items, not as gaps.
	Partial    int   `json:"partial,omitempty"`
	Bytes      int64 `json:"bytes"`
	DurationMS int64 `json:"duration_ms"`
	Polls      int   `json:"polls,omitempty"`
	Retries    int   `json:"retries,omitempty"`
}

// maxGapReasons bounds the gap reasons a result lists (all are counted).
const maxGapReasons = 10

// NewCollector returns the collector of one window of cfg.
func NewCollector(cfg *Config, o Options) *Collector {
	c := &Collector{cfg: cfg, p: &cfg.Paths, progress: o.Progress, redact: o.Redact, cursor: o.From.Cursor, skip: o.From.Skip,
		smp: sampler{rate: cfg.Safety.SamplingRate}, sink: o.Sink, onGap: o.OnGap, onPartial: o.OnPartial}
	if cfg.Safety.DropDuplicates {
		c.dd = newDedupe()
	}
	c.agg = newAggregator(cfg, o.Redact)
	p := c.p
	c.fast = p.Items == nil && p.Summary == nil && p.Cursor == nil && p.Status == nil && p.Done == nil &&
		len(p.Redact) == 0 && p.GroupBy == nil &&
		(cfg.Aggregation.Mode == AggRawItems || cfg.Aggregation.Mode == AggSummaryOnly)
	return c
}

// Finish sends as progress what the aggregator held back (the end of a
// text window's text, which a secret may have straddled): the window has
// ended.
func (c *Collector) Finish() {
	if t, ok := c.agg.(*textAgg); ok && c.progress != nil {
		if rest := t.rest(); rest != "" {
			c.progress(rest)
		}
	}
}

// stopped reports whether the collector ended the window.
func (c *Collector) stopped() bool { return c.end != "" }

// End is why the collector ended the window (a limit, or done), "" while
// it has not.
func (c *Collector) End() string { return c.end }

// Cursor is the upstream cursor after the last document consumed whole.
func (c *Collector) Cursor() string { return c.cursor }

// Stats are the window's counters so far.
func (c *Collector) Stats() Stats { return c.stats }

// Gaps are the reasons of the first gaps recorded (at most
// maxGapReasons) and how many there were.
func (c *Collector) Gaps() (reasons []string, n int) { return c.gaps, c.nGaps }

// Partial counts an item the upstream delivered incomplete, and records
// why (sdk.Item.Partial: a GraphQL event's field errors), the first
// maxGapReasons of them; the item itself is added as any other.
func (c *Collector) Partial(reason string) {
	c.stats.Partial++
	if c.onPartial != nil {
		c.onPartial()
	}
	if len(c.partials) < maxGapReasons {
		c.partials = append(c.partials, c.redact.String(reason))
	}
}

// Polled counts a poll of the upstream.
func (c *Collector) Polled() { c.stats.Polls++ }

// Retried counts a poll retried after a retryable upstream failure.
func (c *Collector) Retried() { c.stats.Retries++ }

// Gap records a point where items may have been lost.
func (c *Collector) Gap(reason string) {
	c.nGaps++
	if c.onGap != nil {
		c.onGap()
	}
	if len(c.gaps) < maxGapReasons {
		c.gaps = append(c.gaps, reason)
	}
}

// Add takes one upstream document: a stream event's data or a poll's
// answer, and the upstream's cursor after it ("" when it has none). It
// reports whether the window must stop (a limit was hit or the upstream
// is done).
func (c *Collector) Add(raw []byte, docCursor string) bool {
	if c.stopped() {
		return true
	}
	before := c.cursor
	skip := c.skip
	c.skip = 0

	if c.fast && !isJSONArray(raw) && !mayNeedTruncation(raw, c.fieldLimit()) {
		if !json.Valid(raw) {
			c.stats.Received++
			c.Gap("an item that is not valid JSON was skipped")
			return false
		}
		if skip > 0 {
			c.Advance(docCursor)
			return false
		}
		if c.take(nil, raw) {
			if c.end == EndMaxItems {
				c.Advance(docCursor)
			} else {
				c.stopAt(before, 1, 1)
			}
			return true
		}
		c.Advance(docCursor)
		return false
	}

	doc, err := jsonpath.Decode(raw)
	if err != nil {
		c.stats.Received++
		c.Gap("an item that is not valid JSON was skipped")
		return false
	}
	if len(c.p.Redact) > 0 {
		var n int
		doc, n = jsonpath.Replace(c.p.Redact, doc, redact.Mark)
		c.stats.Redacted += n
	}
	if v, ok := jsonpath.First(c.p.Summary, doc); ok {
		c.upstream = jsonpath.Encode(v)
	}
	if v, ok := jsonpath.First(c.p.Status, doc); ok {
		c.status = jsonpath.Encode(v)
	}
	if v, ok := jsonpath.First(c.p.Cursor, doc); ok {
		if s := jsonpath.Text(v); s != "" {
			docCursor = s
		}
	}
	done := false
	if v, ok := jsonpath.First(c.p.Done, doc); ok {
		done = jsonpath.Truthy(v)
	}
	var nodes []any
	split := true
	switch {
	case c.p.Items != nil:
		nodes = jsonpath.All(c.p.Items, doc)
	default:
		if arr, ok := doc.([]any); ok {
			nodes = arr
		} else {
			nodes, split = []any{doc}, false
		}
	}
	for i, node := range nodes {
		if i < skip {
			continue
		}
		if split && len(c.p.Redact) > 0 {
			var n int
			node, n = jsonpath.Replace(c.p.Redact, node, redact.Mark)
			c.stats.Redacted += n
		}
		if limit := c.fieldLimit(); limit > 0 {
			var n int
			node, n = truncateStrings(node, limit, c.redact)
			c.stats.FieldsTruncated += n
		}
		if c.take(node, jsonpath.Encode(node)) {
			c.stopAt(before, i+1, len(nodes))
			if c.end == EndMaxItems && i+1 == len(nodes) {
				c.Advance(docCursor)
				if done {
					c.end = EndDone
				}
			}
			return true
		}
	}
	c.Advance(docCursor)
	if done {
		c.end = EndDone
		return true
	}
	return false
}

func (c *Collector) fieldLimit() int {
	if !c.cfg.Safety.TruncateItemFields {
		return 0
	}
	return c.cfg.Safety.MaxFieldLength
}

// Advance moves the cursor past a document (or an upstream's end) that
// brought no items: "" leaves it.
func (c *Collector) Advance(docCursor string) {
	if docCursor != "" {
		c.cursor = docCursor
	}
}

// stopAt records where the window stopped inside a document of n items
// whose first consumed index is next (the item that did not fit, or the one
// after the last counted item).
func (c *Collector) stopAt(before string, next, n int) {
	if c.end == EndMaxBytes {
		next-- // the item that did not fit is not consumed
	}
	if next < n || c.end == EndMaxBytes {
		c.partial, c.partialCursor, c.partialSkip = true, before, next
	}
}

// take counts one item after the safety layer; item is its decoded form
// (nil on the fast path) and raw its final JSON. It reports whether a
// limit ends the window.
func (c *Collector) take(item any, raw []byte) bool {
	c.stats.Received++
	size := int64(len(raw))
	lim := &c.cfg.Limits
	if size > lim.MaxBytes {
		c.stats.SkippedOversize++
		c.Gap("an item of " + strconv.FormatInt(size, 10) + " bytes is larger than max_bytes (" +
			strconv.FormatInt(lim.MaxBytes, 10) + ") and was skipped")
		return false
	}
	if c.sink == nil && c.stats.Bytes+size > lim.MaxBytes {
		c.stats.Received--
		c.end = EndMaxBytes
		return true
	}
	c.stats.Bytes += size
	if c.dd != nil && !c.dd.firstTime(raw) {
		c.stats.DroppedDuplicates++
		return false
	}
	if !c.smp.keep() {
		c.stats.SampledOut++
		return false
	}
	c.stats.Counted++
	if c.sink != nil {
		if !c.sink(raw) {
			c.end = EndCancelled
			return true
		}
		return false
	}
	chunk, ok := c.agg.add(item, raw)
	if ok && c.progress != nil {
		c.progress(chunk)
	}
	if c.stats.Counted >= lim.MaxItems {
		c.end = EndMaxItems
		return true
	}
	return false
}

// Next is where the next window starts (the zero Position: at the
// upstream's start).
func (c *Collector) Next() Position {
	if c.partial {
		return Position{Cursor: c.partialCursor, Skip: c.partialSkip}
	}
	return Position{Cursor: c.cursor}
}

// Position is where a window starts: after the upstream cursor Cursor
// ("" for the upstream's start), skipping the first Skip items of the
// document there (the previous window stopped inside it).
type Position struct {
	Cursor string `json:"c,omitempty"`
	Skip   int    `json:"s,omitempty"`
}

// aggregator folds counted items into a result. add returns the item's
// progress chunk and whether there is one.
type aggregator interface {
	add(item any, raw []byte) (string, bool)
	summary(c *Collector) any
	items() []json.RawMessage
}

func newAggregator(cfg *Config, rs redact.Chain) aggregator {
	p := &cfg.Paths
	switch cfg.Aggregation.Mode {
	case AggSummaryOnly:
		return &countAgg{groupBy: p.GroupBy}
	case AggSummaryPlusSamples:
		return &countAgg{groupBy: p.GroupBy, samples: cfg.Aggregation.SampleSize}
	case AggStats:
		return &statsAgg{value: p.Value}
	case AggLatestState:
		return &latestAgg{key: p.Key, state: map[string]json.RawMessage{}}
	case AggText:
		return &textAgg{text: p.Text, finish: p.Finish, usage: p.Usage, progress: rs.Stream()}
	}
	return &countAgg{groupBy: p.GroupBy, keepAll: true}
}

// maxGroups bounds the distinct group_by values counted one by one; the
// rest are counted under otherGroup.
const (
	maxGroups    = 100
	otherGroup   = "(other)"
	missingGroup = "(missing)"
)

// countAgg serves raw_items (keepAll), summary_only and
// summary_plus_samples (samples per group).
type countAgg struct {
	groupBy  *jsonpath.Path
	keepAll  bool
	samples  int
	kept     []json.RawMessage
	counts   map[string]int
	perGroup map[string]int
}

type countSummary struct {
	Count    int             `json:"count"`
	Counts   map[string]int  `json:"counts,omitempty"`
	Upstream json.RawMessage `json:"upstream,omitempty"`
}

func (a *countAgg) add(item any, raw []byte) (string, bool) {
	group := ""
	if a.groupBy != nil {
		group = missingGroup
		if nodes := a.groupBy.Select(item); len(nodes) > 0 && nodes[0] != nil {
			group = jsonpath.Text(nodes[0])
		}
		if a.counts == nil {
			a.counts = map[string]int{}
		}
		if _, ok := a.counts[group]; !ok && len(a.counts) >= maxGroups {
			group = otherGroup
		}
		a.counts[group]++
	}
	switch {
	case a.keepAll:
		a.kept = append(a.kept, raw)
	case a.samples > 0:
		if a.perGroup == nil {
			a.perGroup = map[string]int{}
		}
		if a.perGroup[group] < a.samples {
			a.perGroup[group]++
			a.kept = append(a.kept, raw)
		}
	}
	return string(raw), true
}

func (a *countAgg) summary(c *Collector) any {
	return countSummary{Count: c.stats.Counted, Counts: a.counts, Upstream: c.upstream}
}

func (a *countAgg) items() []json.RawMessage { return a.kept }

// statsAgg computes count/min/max/avg/p50/p95 over a numeric path.
type statsAgg struct {
	value      *jsonpath.Path
	values     []float64
	nonNumeric int
}

type statsSummary struct {
	Count      int      `json:"count"`
	Numeric    int      `json:"numeric"`
	NonNumeric int      `json:"non_numeric"`
	Min        *float64 `json:"min,omitempty"`
	Max        *float64 `json:"max,omitempty"`
	Avg        *float64 `json:"avg,omitempty"`
	P50        *float64 `json:"p50,omitempty"`
	P95        *float64 `json:"p95,omitempty"`
	Sum        *float64 `json:"sum,omitempty"`
}

func (a *statsAgg) add(item any, raw []byte) (string, bool) {
	if f, ok := numberAt(a.value.Select(item)); ok {
		a.values = append(a.values, f)
	} else {
		a.nonNumeric++
	}
	return string(raw), true
}

func numberAt(nodes []any) (float64, bool) {
	if len(nodes) == 0 {
		return 0, false
	}
	var f float64
	var err error
	switch t := nodes[0].(type) {
	case json.Number:
		f, err = t.Float64()
	case float64:
		f = t
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(t), 64)
	default:
		return 0, false
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func (a *statsAgg) summary(c *Collector) any {
	s := statsSummary{Count: c.stats.Counted, Numeric: len(a.values), NonNumeric: a.nonNumeric}
	if n := len(a.values); n > 0 {
		v := slices.Clone(a.values)
		slices.Sort(v)
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		avg := sum / float64(n)
		s.Min, s.Max, s.Sum, s.Avg = &v[0], &v[n-1], &sum, &avg
		p50, p95 := percentile(v, 0.50), percentile(v, 0.95)
		s.P50, s.P95 = &p50, &p95
	}
	return s
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, q float64) float64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func (a *statsAgg) items() []json.RawMessage { return nil }

// latestAgg keeps the last item per key.
type latestAgg struct {
	key   *jsonpath.Path
	state map[string]json.RawMessage
}

type latestSummary struct {
	Count int                        `json:"count"`
	Keys  int                        `json:"keys"`
	State map[string]json.RawMessage `json:"state"`
}

func (a *latestAgg) add(item any, raw []byte) (string, bool) {
	key := missingGroup
	if nodes := a.key.Select(item); len(nodes) > 0 && nodes[0] != nil {
		key = jsonpath.Text(nodes[0])
	}
	a.state[key] = raw
	return string(raw), true
}

func (a *latestAgg) summary(c *Collector) any {
	return latestSummary{Count: c.stats.Counted, Keys: len(a.state), State: a.state}
}

func (a *latestAgg) items() []json.RawMessage { return nil }

// textAgg joins the text of LLM-style chunks. Its progress chunks are the
// joined text as it grows, redacted as a whole (a secret split between
// two chunks is held back until it can be redacted): not always one
// chunk's delta.
type textAgg struct {
	text, finish, usage *jsonpath.Path
	b                   strings.Builder
	reason              string
	usageJSON           json.RawMessage
	chunks              int
	progress            *redact.Stream
}

type textSummary struct {
	Text         string          `json:"text"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Usage        json.RawMessage `json:"usage,omitempty"`
	Chunks       int             `json:"chunks"`
}

func (a *textAgg) add(item any, _ []byte) (string, bool) {
	var delta strings.Builder
	for _, n := range a.text.Select(item) {
		if s, ok := n.(string); ok {
			delta.WriteString(s)
		}
	}
	if a.finish != nil {
		if nodes := a.finish.Select(item); len(nodes) > 0 {
			if s, ok := nodes[0].(string); ok && s != "" {
				a.reason = s
			}
		}
	}
	if a.usage != nil {
		if nodes := a.usage.Select(item); len(nodes) > 0 && nodes[0] != nil {
			a.usageJSON = jsonpath.Encode(nodes[0])
		}
	}
	if delta.Len() == 0 {
		return "", false
	}
	a.chunks++
	a.b.WriteString(delta.String())
	out := a.progress.Add(delta.String())
	return out, out != ""
}

// rest is the text its progress chunks held back.
func (a *textAgg) rest() string { return a.progress.Flush() }

func (a *textAgg) summary(*Collector) any {
	return textSummary{Text: a.b.String(), FinishReason: a.reason, Usage: a.usageJSON, Chunks: a.chunks}
}

func (a *textAgg) items() []json.RawMessage { return nil }

// Redactors are the call's redactors (Options.Redact).
func (c *Collector) Redactors() redact.Chain { return c.redact }
