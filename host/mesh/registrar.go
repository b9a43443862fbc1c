package mesh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crankmcp/crank/host/configblock"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/internal/telemetry"
)

// Tool is one tool the endpoint publishes, as the registrar makes a
// capability of it.
type Tool struct {
	Name, Description string
	// InputSchema and OutputSchema are the tool's JSON Schemas (nil for
	// none).
	InputSchema, OutputSchema json.RawMessage
	// Meta is the tool's _meta: a window tool's io.crank/execution (its
	// mode) and stream_type (text for a text stream, such as an LLM's).
	Meta map[string]any
}

// Tags that mark what a capability's tool is, as mesh consumers look for
// them: mcp-mesh's own streaming marker on a text stream (an LLM's: its
// consumers' streamGenerate and stream() pick such tools), Crank's own on
// every window tool and family tool.
const (
	TagStream  = "ai.mcpmesh.stream"
	TagWindow  = "crank.window"
	TagSession = "crank.session"
	TagJob     = "crank.job"
)

// Elector decides which replica of a fleet sends the registration
// (*store.Etcd is one: HoldDuty, ReleaseDuty).
type Elector interface {
	HoldDuty(ctx context.Context, duty string) (bool, error)
	ReleaseDuty(ctx context.Context, duty string) error
}

// Options configure a Registrar.
type Options struct {
	Config Config
	// Version is the agent's version when the config names none.
	Version string
	// Tools lists what the endpoint publishes now.
	Tools func() []Tool
	// Elector, when set, makes the registrar send only while this replica
	// holds the config's duty; nil sends always (one process).
	Elector Elector
	Logger  *zap.Logger
	// Client makes the registry requests; default one with a 10s timeout.
	Client *http.Client
}

// Registrar keeps an endpoint registered with a registry (see the package
// doc). Start it once; Stop deregisters.
type Registrar struct {
	log    *zap.Logger
	client *http.Client

	mu      sync.Mutex
	opts    Options
	started bool
	nudge   chan struct{}
	stop    chan struct{}
	done    chan struct{}

	// The loop's own: what the registry has (the last registration's
	// digest; nil for nothing) and the failures in a row.
	sent     []byte
	failures int
	holder   bool
}

// New returns the registrar of o, whose Config must pass Check.
func New(o Options) (*Registrar, error) {
	if err := o.Config.Check("mesh"); err != nil {
		return nil, err
	}
	if !o.Config.Enabled() {
		return nil, errors.New("mesh: registry: required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Client == nil {
		// Redirects within the registry's origin only: a registration is
		// never sent anywhere else, whatever the registry answers.
		o.Client = httpadapter.NewClient(httpadapter.ClientOptions{})
		o.Client.Timeout = 10 * time.Second
	}
	if o.Tools == nil {
		o.Tools = func() []Tool { return nil }
	}
	return &Registrar{log: o.Logger.Named("mesh"), client: o.Client, opts: o,
		nudge: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start starts the registration loop; it returns at once, whatever the
// registry's state. Starting a started registrar does nothing.
func (r *Registrar) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	go r.loop()
}

// Update replaces the registration's config, tool source and elector (a
// reload's; nil keeps the current one) and sends it again. The config's
// registry and agent id stay the ones the registrar was made with:
// another agent is another registrar.
func (r *Registrar) Update(cfg Config, tools func() []Tool, elect Elector) {
	r.mu.Lock()
	cfg.Registry, cfg.AgentID = r.opts.Config.Registry, r.opts.Config.AgentID
	r.opts.Config = cfg
	if tools != nil {
		r.opts.Tools = tools
	}
	if elect != nil {
		r.opts.Elector = elect
	}
	r.mu.Unlock()
	r.Changed()
}

func (r *Registrar) elector() Elector {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts.Elector
}

// Changed says the endpoint's tools changed: the registration is checked
// (and sent when it differs) at once instead of at the next heartbeat.
func (r *Registrar) Changed() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// Stop ends the loop and, if this replica held the registration, removes
// it from the registry (bounded by ctx) and gives up the duty, so that the
// agent is gone from the mesh at once — or, in a fleet, another replica
// sends it at its next heartbeat.
func (r *Registrar) Stop(ctx context.Context) error {
	r.mu.Lock()
	started := r.started
	r.started = false
	r.mu.Unlock()
	if !started {
		return nil
	}
	close(r.stop)
	<-r.done
	if !r.holder {
		return nil
	}
	err := r.deregister(ctx)
	if elect := r.elector(); elect != nil {
		if rerr := elect.ReleaseDuty(ctx, r.config().Duty()); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func (r *Registrar) config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts.Config
}

// loop heartbeats at the interval, at once on a change, and backs off
// while the registry fails.
func (r *Registrar) loop() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.nudge:
		case <-time.After(wait):
		}
		r.beat(ctx)
		wait = r.config().interval()
		if r.failures > 0 {
			wait = min(wait<<min(r.failures-1, 4), time.Minute)
		}
	}
}

// beat is one heartbeat: take (or keep) the duty, then register when the
// registry lacks the current registration, else confirm it.
func (r *Registrar) beat(ctx context.Context) {
	cfg := r.config()
	holder := true
	if elect := r.elector(); elect != nil {
		var err error
		holder, err = elect.HoldDuty(ctx, cfg.Duty())
		if err != nil {
			// etcd cannot say: go on as before. Two replicas sending the
			// same registration for a while is harmless; none sending
			// would let the registry mark the agent unhealthy.
			holder = r.holder
			if ctx.Err() == nil {
				r.log.Debug("cannot tell whether this replica holds the mesh registration; it goes on as before",
					zap.String("agent", cfg.AgentID), zap.Bool("holder", holder), zap.Error(err))
			}
		}
	}
	if !holder {
		if r.holder {
			r.log.Info("another replica sends the mesh registration now", zap.String("agent", cfg.AgentID))
		}
		r.holder, r.sent = false, nil
		telemetry.MeshRegistered(cfg.AgentID, false)
		return
	}
	if !r.holder {
		r.log.Info("this replica sends the mesh registration", zap.String("agent", cfg.AgentID), zap.String("registry", cfg.Registry))
	}
	r.holder = true
	body, n := r.registration(cfg)
	if n == 0 {
		r.log.Debug("the endpoint publishes no tools yet; nothing to register", zap.String("agent", cfg.AgentID))
		return
	}
	sum := sha256.Sum256(body)
	var err error
	switch {
	case !bytes.Equal(r.sent, sum[:]):
		err = r.register(ctx, cfg, body)
	default:
		var again bool
		again, err = r.heartbeat(ctx, cfg)
		if err == nil && again {
			err = r.register(ctx, cfg, body)
		}
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		r.sent = nil
		r.failures++
		telemetry.MeshRegistered(cfg.AgentID, false)
		if r.failures == 1 {
			r.log.Warn("the mcp-mesh registry is unreachable or refuses the registration; the endpoint serves on, retrying with backoff",
				zap.String("agent", cfg.AgentID), zap.String("registry", cfg.Registry), zap.Error(err))
		}
		return
	}
	if r.failures > 0 {
		r.log.Info("registered with the mcp-mesh registry again", zap.String("agent", cfg.AgentID), zap.Int("failures", r.failures))
	}
	r.sent, r.failures = sum[:], 0
	telemetry.MeshRegistered(cfg.AgentID, true)
}

// register sends the whole registration.
func (r *Registrar) register(ctx context.Context, cfg Config, body []byte) error {
	err := r.post(ctx, cfg, body)
	telemetry.MeshRequest("register", err == nil)
	if err == nil {
		r.log.Debug("mesh registration sent", zap.String("agent", cfg.AgentID))
	}
	return err
}

func (r *Registrar) post(ctx context.Context, cfg Config, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint(cfg, "heartbeat"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ans struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	_ = json.Unmarshal(b, &ans)
	// The registry answers 200 even when it refuses: its status says.
	if resp.StatusCode/100 != 2 || ans.Status != "success" {
		msg := ans.Message
		if msg == "" {
			msg = ans.Error
		}
		return fmt.Errorf("POST /heartbeat: HTTP %d, status %q: %s", resp.StatusCode, ans.Status, truncate(msg, 300))
	}
	return nil
}

// heartbeat confirms the registration; again reports that the registry
// wants it whole (it changed, or does not know the agent).
func (r *Registrar) heartbeat(ctx context.Context, cfg Config) (again bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, r.endpoint(cfg, "heartbeat", cfg.AgentID), nil)
	if err != nil {
		return false, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		telemetry.MeshRequest("heartbeat", false)
		return false, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		telemetry.MeshRequest("heartbeat", true)
		return false, nil
	case http.StatusAccepted, http.StatusGone, http.StatusNotFound:
		telemetry.MeshRequest("heartbeat", true)
		if resp.StatusCode != http.StatusAccepted {
			r.log.Info("the mcp-mesh registry does not know the agent (it restarted or evicted it); registering again",
				zap.String("agent", cfg.AgentID))
		}
		return true, nil
	}
	telemetry.MeshRequest("heartbeat", false)
	return false, fmt.Errorf("HEAD /heartbeat/%s: HTTP %d", cfg.AgentID, resp.StatusCode)
}

// deregister removes the agent from the registry.
func (r *Registrar) deregister(ctx context.Context) error {
	cfg := r.config()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.endpoint(cfg, "agents", cfg.AgentID), nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
			err = fmt.Errorf("DELETE /agents/%s: HTTP %d", cfg.AgentID, resp.StatusCode)
		}
	}
	telemetry.MeshRequest("deregister", err == nil)
	telemetry.MeshRegistered(cfg.AgentID, false)
	if err != nil {
		r.log.Warn("the mesh registration was not removed; the registry marks the agent unhealthy once its heartbeats stop",
			zap.String("agent", cfg.AgentID), zap.Error(err))
		return err
	}
	r.log.Info("mesh registration removed", zap.String("agent", cfg.AgentID))
	return nil
}

func (r *Registrar) endpoint(cfg Config, segs ...string) string {
	u, _ := url.JoinPath(cfg.Registry, segs...)
	return u
}

// registration is the registry's MeshAgentRegistration of the config and
// the tools published now: one capability per tool (mcp-mesh 3.7's
// registry requires at least one; an endpoint that publishes none yet
// registers nothing until it does).
func (r *Registrar) registration(cfg Config) ([]byte, int) {
	r.mu.Lock()
	tools, version := r.opts.Tools, r.opts.Version
	r.mu.Unlock()
	if cfg.Version != "" {
		version = cfg.Version
	}
	if version == "" {
		version = "1.0.0"
	}
	host, port, _ := cfg.hostPort()
	name := cfg.Name
	if name == "" {
		name = cfg.AgentID
	}
	namespace := configblock.Value(&cfg, "namespace")
	caps := []capability{}
	for _, t := range tools() {
		caps = append(caps, capabilityOf(t, version, cfg.Tags))
	}
	slices.SortFunc(caps, func(a, b capability) int { return strings.Compare(a.FunctionName, b.FunctionName) })
	b, _ := json.Marshal(agent{AgentID: cfg.AgentID, AgentType: "mcp_agent", Name: name, Version: version,
		Namespace: namespace, HTTPHost: host, HTTPPort: port, Tools: caps})
	return b, len(caps)
}

// agent is the registry's MeshAgentRegistration (its timestamp left out:
// the registry stamps what it receives, and the body's digest tells a
// change).
type agent struct {
	AgentID   string       `json:"agent_id"`
	AgentType string       `json:"agent_type"`
	Name      string       `json:"name"`
	Version   string       `json:"version"`
	Namespace string       `json:"namespace"`
	HTTPHost  string       `json:"http_host"`
	HTTPPort  int          `json:"http_port"`
	Tools     []capability `json:"tools"`
}

// capability is the registry's MeshToolRegistration.
type capability struct {
	FunctionName string          `json:"function_name"`
	Capability   string          `json:"capability"`
	Version      string          `json:"version"`
	Tags         []string        `json:"tags"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Kwargs       map[string]any  `json:"kwargs,omitempty"`
}

// capabilityOf is the capability of a tool: its name as function and
// capability, its schemas, the config's tags and the ones that mark its
// kind, and in kwargs what mesh consumers read of a streaming tool.
func capabilityOf(t Tool, version string, tags []string) capability {
	c := capability{FunctionName: t.Name, Capability: t.Name, Version: version, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Tags: slices.Clone(tags)}
	if c.Tags == nil {
		c.Tags = []string{}
	}
	ex, _ := t.Meta["io.crank/execution"].(map[string]any)
	mode, _ := ex["mode"].(string)
	switch {
	case mode == "window":
		c.Tags = append(c.Tags, TagWindow)
		c.Kwargs = map[string]any{"streaming": true}
		if st, _ := t.Meta["stream_type"].(string); st == "text" {
			c.Tags = append(c.Tags, TagStream)
			c.Kwargs["stream_type"] = "text"
		}
	case mode == "session":
		c.Tags = append(c.Tags, TagSession)
	case mode == "async_job":
		c.Tags = append(c.Tags, TagJob)
	}
	return c
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
