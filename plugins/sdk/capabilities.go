package sdk

import "github.com/crankmcp/crank/plugins/sdk/internal/wire"

// Capabilities are the optional parts of the protocol an adapter serves,
// as the host reads them from its Describe answer: the SDK derives each
// from the interfaces the adapter implements and its Description
// (capabilityTable, the one place a capability is defined).
type Capabilities struct {
	Validate bool // ValidateOperation: OperationValidator
	Expand   bool // ExpandOperation: OperationExpander
	Stream   bool // Stream: Streamer
	Streams  bool // Streams, many streams on one call: Streamer
	// StreamsInvoke: unary calls on Streams (every adapter of a current
	// SDK); the host's Invoke takes them there.
	StreamsInvoke bool
	Progress      bool // InvokeWithProgress: Description.Progress
	Log           bool // log messages in InvokeWithProgress: Description.Log
	// ClientRequests: client requests in InvokeWithProgress and
	// AnswerClientRequest (Description.ClientRequests).
	ClientRequests bool
	// Resume: resume states in InvokeWithProgress and calls resumed from
	// one (Description.Resume).
	Resume bool
	Watch  bool // WatchOperations: OperationWatcher
	// Resources and Prompts: ReadResource and GetPrompt (Publisher).
	Resources, Prompts bool
	Completions        bool // Complete: Completer
	Subscribe          bool // WatchResource: ResourceWatcher
	// Egress: every connection of an operation is held to its egress
	// rules where it is dialled (Description.Egress).
	Egress bool
}

// capabilityTable defines every capability once: its name on the wire,
// whether an adapter has it, and its field of Capabilities.
var capabilityTable = []struct {
	name  string
	has   func(a Adapter, d *Description) bool
	field func(*Capabilities) *bool
}{
	{wire.CapabilityValidate, implements[OperationValidator], func(c *Capabilities) *bool { return &c.Validate }},
	{wire.CapabilityExpand, implements[OperationExpander], func(c *Capabilities) *bool { return &c.Expand }},
	{wire.CapabilityStream, implements[Streamer], func(c *Capabilities) *bool { return &c.Stream }},
	{wire.CapabilityStreams, implements[Streamer], func(c *Capabilities) *bool { return &c.Streams }},
	{wire.CapabilityWatch, implements[OperationWatcher], func(c *Capabilities) *bool { return &c.Watch }},
	{wire.CapabilityResources, implements[Publisher], func(c *Capabilities) *bool { return &c.Resources }},
	{wire.CapabilityPrompts, implements[Publisher], func(c *Capabilities) *bool { return &c.Prompts }},
	{wire.CapabilityCompletions, implements[Completer], func(c *Capabilities) *bool { return &c.Completions }},
	{wire.CapabilitySubscribe, implements[ResourceWatcher], func(c *Capabilities) *bool { return &c.Subscribe }},
	// Log, client requests and resume states travel in
	// InvokeWithProgress: they need Progress.
	{wire.CapabilityProgress, func(_ Adapter, d *Description) bool { return d.Progress }, func(c *Capabilities) *bool { return &c.Progress }},
	{wire.CapabilityLog, func(_ Adapter, d *Description) bool { return d.Progress && d.Log }, func(c *Capabilities) *bool { return &c.Log }},
	{wire.CapabilityClientRequests, func(_ Adapter, d *Description) bool { return d.Progress && d.ClientRequests }, func(c *Capabilities) *bool { return &c.ClientRequests }},
	{wire.CapabilityResume, func(_ Adapter, d *Description) bool { return d.Progress && d.Resume }, func(c *Capabilities) *bool { return &c.Resume }},
	{wire.CapabilityEgress, func(_ Adapter, d *Description) bool { return d.Egress }, func(c *Capabilities) *bool { return &c.Egress }},
	// Every adapter takes unary calls on Streams (streams.go).
	{wire.CapabilityStreamsInvoke, func(Adapter, *Description) bool { return true }, func(c *Capabilities) *bool { return &c.StreamsInvoke }},
}

func implements[I any](a Adapter, _ *Description) bool {
	_, ok := a.(I)
	return ok
}

// capabilitiesOf are the names of the capabilities adapter a, described
// by d, has: what its Describe answer lists.
func capabilitiesOf(a Adapter, d *Description) []string {
	names := []string{}
	for _, c := range capabilityTable {
		if c.has(a, d) {
			names = append(names, c.name)
		}
	}
	return names
}

// ReadCapabilities reads the capability names of a Describe answer;
// names it does not know (a later SDK's) are left out.
func ReadCapabilities(names []string) Capabilities {
	var caps Capabilities
	for _, n := range names {
		for _, c := range capabilityTable {
			if c.name == n {
				*c.field(&caps) = true
			}
		}
	}
	return caps
}
