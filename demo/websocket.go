package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	ws "github.com/coder/websocket"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Feed is the demo realtime WebSocket feed (handler module
// http.handlers.crank_demo_websocket, directive crank_demo_websocket) that
// the tools of demo/websocket.yaml subscribe to.
//
// GET /ws/feed upgrades to a WebSocket. The client sends JSON text
// messages:
//
//	{"op":"subscribe","channel":"alerts","min_severity":"warning","from":"120"}
//	{"op":"subscribe","channel":"telemetry","host":"web-1"}
//	{"op":"unsubscribe","channel":"alerts"}
//	{"op":"ping"}
//
// and gets {"type":"subscribed","channel":...}, {"type":"unsubscribed",...},
// {"type":"pong"} or {"type":"error","message":...} back. Each channel has
// an event every 100ms, numbered by seq from the feed's start:
//
//	{"type":"alert","seq":121,"ts":...,"severity":"critical","service":"auth","host":"db-1","msg":"disk almost full"}
//	{"type":"telemetry","seq":121,"ts":...,"host":"web-1","cpu":41.5,"latency_ms":37}
//
// min_severity (info, warning, critical) and host filter the events;
// from resumes after that seq (up to 100 events back). Protocol pings are
// answered.
type Feed struct {
	start time.Time
}

var _ caddyhttp.MiddlewareHandler = (*Feed)(nil)

func init() {
	caddy.RegisterModule(Feed{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_websocket", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		f := new(Feed)
		return f, f.UnmarshalCaddyfile(h.Dispenser)
	})
	// Like crank_demo_streams: it serves /ws/* and hands every other
	// request on, so it can share a site block.
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_websocket", httpcaddyfile.Before, "abort")
}

// CaddyModule returns the Caddy module information.
func (Feed) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_websocket", New: func() caddy.Module { return new(Feed) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo_websocket`.
func (f *Feed) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Provision starts the feed's clock.
func (f *Feed) Provision(caddy.Context) error {
	f.start = time.Now()
	return nil
}

// ServeHTTP serves /ws/feed; other paths go to the next handler.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.URL.Path != "/ws/feed" {
		return next.ServeHTTP(w, r)
	}
	f.serve(w, r)
	return nil
}

// NewFeedHandler returns the demo feed as a plain handler of /ws/feed (for
// tests).
func NewFeedHandler() http.Handler {
	f := &Feed{start: time.Now()}
	return http.HandlerFunc(f.serve)
}

// feedTick is the interval between two events of a channel.
const feedTick = 100 * time.Millisecond

var (
	severities = []string{"info", "warning", "critical"}
	alertMsgs  = map[string][]string{
		"info":     {"deploy finished", "certificate renewed", "autoscaler added a node"},
		"warning":  {"latency above SLO", "disk 80% full", "error rate rising"},
		"critical": {"service down", "disk almost full", "payment failures spiking"},
	}
)

func severityRank(s string) int {
	for i, x := range severities {
		if x == s {
			return i
		}
	}
	return -1
}

// event is event number seq of a channel.
func (f *Feed) event(channel string, seq uint64) map[string]any {
	ts := f.start.Add(time.Duration(seq) * feedTick).UTC().Format(time.RFC3339Nano)
	if channel == "telemetry" {
		h := mix(seq + 1<<41)
		latency := 15 + h%60
		if h%23 == 0 {
			latency += 300
		}
		return map[string]any{"type": "telemetry", "seq": seq, "ts": ts, "host": hosts[seq%uint64(len(hosts))],
			"cpu": float64(h%1000) / 10, "latency_ms": latency}
	}
	h := mix(seq + 1<<42)
	sev := "info"
	switch {
	case h%10 == 0:
		sev = "critical"
	case h%10 < 3:
		sev = "warning"
	}
	msgs := alertMsgs[sev]
	return map[string]any{"type": "alert", "seq": seq, "ts": ts, "severity": sev,
		"service": services[(h>>8)%uint64(len(services))], "host": hosts[(h>>12)%uint64(len(hosts))],
		"msg": msgs[(h>>16)%uint64(len(msgs))]}
}

// subscription is one channel a connection follows.
type subscription struct {
	next        uint64
	minSeverity int
	host        string
}

func (s *subscription) wants(ev map[string]any) bool {
	if s.host != "" && ev["host"] != s.host {
		return false
	}
	if sev, ok := ev["severity"].(string); ok && severityRank(sev) < s.minSeverity {
		return false
	}
	return true
}

type feedRequest struct {
	Op          string `json:"op"`
	Channel     string `json:"channel"`
	MinSeverity string `json:"min_severity"`
	Host        string `json:"host"`
	From        any    `json:"from"`
}

func (f *Feed) serve(w http.ResponseWriter, r *http.Request) {
	c, err := ws.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	subs := map[string]*subscription{}
	send := func(v any) {
		b, _ := json.Marshal(v)
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if c.Write(wctx, ws.MessageText, b) != nil {
			cancel()
		}
	}
	now := func() uint64 { return uint64(time.Since(f.start) / feedTick) }
	go func() {
		defer cancel()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req feedRequest
			if json.Unmarshal(b, &req) != nil {
				send(map[string]any{"type": "error", "message": "messages are JSON objects with an op"})
				continue
			}
			switch req.Op {
			case "ping":
				send(map[string]any{"type": "pong"})
			case "subscribe":
				if req.Channel != "alerts" && req.Channel != "telemetry" {
					send(map[string]any{"type": "error", "message": "unknown channel (alerts, telemetry)"})
					continue
				}
				s := &subscription{next: now(), host: req.Host}
				if req.MinSeverity != "" {
					if s.minSeverity = severityRank(req.MinSeverity); s.minSeverity < 0 {
						send(map[string]any{"type": "error", "message": "min_severity must be info, warning or critical"})
						continue
					}
				}
				if from, err := strconv.ParseUint(toText(req.From), 10, 64); err == nil && from+1 <= s.next {
					s.next = max(from+1, s.next-min(s.next, 100))
				}
				mu.Lock()
				subs[req.Channel] = s
				mu.Unlock()
				send(map[string]any{"type": "subscribed", "channel": req.Channel})
			case "unsubscribe":
				mu.Lock()
				delete(subs, req.Channel)
				mu.Unlock()
				send(map[string]any{"type": "unsubscribed", "channel": req.Channel})
			default:
				send(map[string]any{"type": "error", "message": "op must be subscribe, unsubscribe or ping"})
			}
		}
	}()
	tick := time.NewTicker(feedTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Close(ws.StatusNormalClosure, "")
			return
		case <-tick.C:
		}
		var out []map[string]any
		mu.Lock()
		for ch, s := range subs {
			for ; s.next <= now(); s.next++ {
				if ev := f.event(ch, s.next); s.wants(ev) {
					out = append(out, ev)
				}
			}
		}
		mu.Unlock()
		for _, ev := range out {
			send(ev)
		}
	}
}

func toText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}
