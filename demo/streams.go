package demo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Streams is the streaming part of the demo upstream (handler module
// http.handlers.crank_demo_streams, directive crank_demo_streams): endless
// and long-poll sources for Crank's window tools (demo/streams.yaml).
//
// Routes:
//
//	GET  /streams/logs                 SSE: a log line every 100ms, forever;
//	                                   resumes after Last-Event-ID; ?service=
//	GET  /streams/metrics?since=N      long-poll: the metric samples after
//	                                   sample N (one every 200ms), waiting up
//	                                   to 2s for a new one
//	POST /streams/v1/chat/completions  an OpenAI-compatible chat completion;
//	                                   "stream": true answers SSE chunks then
//	                                   data: [DONE]
//	POST   /streams/reports            starts a report job: 202 and a ticket
//	GET    /streams/reports/{ticket}   its status: done after about 3s
//	DELETE /streams/reports/{ticket}   cancels it (204)
//
// The report job keeps no state: its ticket carries its start time, so any
// replica of the demo upstream answers for any ticket.
type Streams struct {
	mux   *http.ServeMux
	start time.Time
}

func init() {
	caddy.RegisterModule(Streams{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_streams", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		s := new(Streams)
		return s, s.UnmarshalCaddyfile(h.Dispenser)
	})
	// Before abort, and so before crank_demo (ordered just before
	// respond): crank_demo_streams serves /streams/* and hands every other
	// request on, so both can sit in one site block.
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_streams", httpcaddyfile.Before, "abort")
}

// CaddyModule returns the Caddy module information.
func (Streams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_streams", New: func() caddy.Module { return new(Streams) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo_streams`.
func (s *Streams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Provision sets up the routes.
func (s *Streams) Provision(caddy.Context) error {
	s.start = time.Now()
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /streams/logs", s.logs)
	s.mux.HandleFunc("GET /streams/metrics", s.metrics)
	s.mux.HandleFunc("POST /streams/v1/chat/completions", s.chat)
	s.mux.HandleFunc("POST /streams/reports", s.startReport)
	s.mux.HandleFunc("GET /streams/reports/{ticket}", s.reportStatus)
	s.mux.HandleFunc("DELETE /streams/reports/{ticket}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	return nil
}

// reportDuration is how long a demo report job runs.
const reportDuration = 3 * time.Second

func (s *Streams) startReport(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Service string `json:"service"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if req.Service == "" {
		req.Service = "all"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"ticket": fmt.Sprintf("rep-%d-%s", time.Now().UnixMilli(), req.Service),
		"status": "queued",
	})
}

func (s *Streams) reportStatus(w http.ResponseWriter, r *http.Request) {
	var started int64
	var service string
	if _, err := fmt.Sscanf(strings.ReplaceAll(r.PathValue("ticket"), "-", " "), "rep %d %s", &started, &service); err != nil {
		http.Error(w, `{"error":"unknown ticket"}`, http.StatusNotFound)
		return
	}
	elapsed := time.Since(time.UnixMilli(started))
	pct := min(100, int(100*elapsed/reportDuration))
	out := map[string]any{"ticket": r.PathValue("ticket"), "state": "running", "percent": pct, "done": pct >= 100}
	if pct >= 100 {
		n := mix(uint64(started)) % 1000
		out["state"] = "finished"
		out["report"] = map[string]any{"service": service, "requests": 10000 + n, "errors": n % 97,
			"p95_latency_ms": 40 + n%60}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// ServeHTTP serves the stream routes; other paths go to the next handler.
func (s *Streams) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		return next.ServeHTTP(w, r)
	}
	s.mux.ServeHTTP(w, r)
	return nil
}

// mix is a small deterministic hash: the demo data depends only on ids.
func mix(n uint64) uint64 {
	n ^= n >> 33
	n *= 0xff51afd7ed558ccd
	n ^= n >> 33
	n *= 0xc4ceb9fe1a85ec53
	return n ^ n>>33
}

var (
	services = []string{"checkout", "search", "auth"}
	hosts    = []string{"web-1", "web-2", "db-1"}
	messages = map[string][]string{
		"info":  {"request served", "cache hit", "user signed in", "job scheduled"},
		"warn":  {"slow query", "retrying upstream call", "cache miss storm"},
		"error": {"upstream timeout", "payment declined by processor", "connection reset"},
	}
)

// logLine is log line number id.
func logLine(id uint64, at time.Time) map[string]any {
	h := mix(id)
	level := "info"
	switch {
	case h%10 == 0:
		level = "error"
	case h%10 < 3:
		level = "warn"
	}
	msgs := messages[level]
	return map[string]any{
		"ts":       at.UTC().Format(time.RFC3339Nano),
		"level":    level,
		"service":  services[(h>>8)%uint64(len(services))],
		"msg":      msgs[(h>>16)%uint64(len(msgs))],
		"trace_id": fmt.Sprintf("%016x", h),
		// A personal detail the demo operations redact (redacted_paths).
		"user": map[string]any{"id": h % 1000, "email": fmt.Sprintf("user%d@example.com", h%1000)},
	}
}

func (s *Streams) logs(w http.ResponseWriter, r *http.Request) {
	flusher := http.NewResponseController(w)
	next, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	next++
	service := r.URL.Query().Get("service")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = flusher.Flush()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case now := <-tick.C:
			line := logLine(next, now)
			if service == "" || line["service"] == service {
				data, _ := json.Marshal(line)
				fmt.Fprintf(w, "id: %d\nevent: log\ndata: %s\n\n", next, data)
				_ = flusher.Flush()
			}
			next++
		}
	}
}

// sample is metric sample number n.
func (s *Streams) sample(n uint64) map[string]any {
	h := mix(n + 1<<40)
	host := hosts[n%uint64(len(hosts))]
	latency := 20 + h%80
	if h%17 == 0 {
		latency += 400 // a spike
	}
	return map[string]any{
		"seq":        n,
		"ts":         s.start.Add(time.Duration(n) * 200 * time.Millisecond).UTC().Format(time.RFC3339Nano),
		"host":       host,
		"cpu":        float64(h%1000) / 10,
		"latency_ms": latency,
	}
}

func (s *Streams) metrics(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	available := func() uint64 { return uint64(time.Since(s.start) / (200 * time.Millisecond)) }
	// Long-poll: hold the request until there is a new sample (or 2s).
	deadline := time.Now().Add(2 * time.Second)
	for available() <= since && time.Now().Before(deadline) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	end := min(available(), since+50)
	var samples []map[string]any
	for n := since; n < end; n++ {
		samples = append(samples, s.sample(n))
	}
	if samples == nil {
		samples = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"samples": samples, "next": strconv.FormatUint(max(end, since), 10), "done": false})
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	MaxTokens     int  `json:"max_tokens"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chat is a tiny OpenAI-compatible chat completions endpoint: it answers
// with a canned reply about the last user message, word by word.
func (s *Streams) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"messages is required","type":"invalid_request_error"}}`)
		return
	}
	last := req.Messages[len(req.Messages)-1].Content
	reply := "You said: \"" + last + "\". I am Crank's demo model: every word of this answer reached you as its own progress notification, and the final result joins them."
	words := strings.SplitAfter(reply, " ")
	finish := "stop"
	if req.MaxTokens > 0 && req.MaxTokens < len(words) {
		words, finish = words[:req.MaxTokens], "length"
	}
	model := req.Model
	if model == "" {
		model = "crank-demo"
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words)}
	created := time.Now().Unix()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-demo", "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": strings.Join(words, "")}, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	flusher := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	chunk := func(delta map[string]string, reason any) {
		data, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": reason}},
		})
		fmt.Fprintf(w, "data: %s\n\n", data)
		_ = flusher.Flush()
	}
	chunk(map[string]string{"role": "assistant"}, nil)
	for _, word := range words {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Millisecond):
		}
		chunk(map[string]string{"content": word}, nil)
	}
	chunk(map[string]string{}, finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		data, _ := json.Marshal(map[string]any{"id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": created,
			"model": model, "choices": []any{}, "usage": usage})
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = flusher.Flush()
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Streams)(nil)
	_ caddyhttp.MiddlewareHandler = (*Streams)(nil)
	_ caddyfile.Unmarshaler       = (*Streams)(nil)
)
