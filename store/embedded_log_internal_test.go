package store

import (
	"errors"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The embedded etcd's harmless storage-version race at bootstrap is not
// logged; the same message with another cause, and other errors, are.
func TestStorageVersionRaceNotLogged(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := zap.New(core).WithOptions(quietOnShutdown(&atomic.Bool{}))
	lg.Error("failed to update storage version", zap.String("cluster-version", "3.7.0"),
		zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	lg.Error("failed to update storage version", zap.Error(errors.New("cannot create migration plan")))
	lg.Error("something else", zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	if n := logs.Len(); n != 2 {
		t.Fatalf("logged %d lines, want the 2 that are not the bootstrap race: %v", n, logs.All())
	}
}
