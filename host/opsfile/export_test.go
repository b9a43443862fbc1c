package opsfile

import (
	"maps"
	"slices"
)

// What the tests hold the entry's tags to.
const MaxSessionBufferItems = maxStreamSessionBufferItems

// PresetNames are the presets the operations file knows.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }
