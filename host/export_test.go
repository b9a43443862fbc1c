package host

import (
	"context"
	"maps"
	"slices"
)

// OwnRunners gives h a runner set of its own and returns its stop, so a
// test stops h's runners without stopping those of the tests beside it.
func OwnRunners(h *Host) func(context.Context) error {
	rs := &runnerSet{live: map[*runner]struct{}{}}
	h.runners = rs
	return rs.stop
}

// What the tests hold the entry's tags to.
const MaxSessionBufferItems = maxStreamSessionBufferItems

// FieldPointer is fieldPointer, the conversion of adapters' dotted fields.
var FieldPointer = fieldPointer

// PresetNames are the presets the host knows.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }
