package store

import (
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// shutdownQuiet drops the lines the embedded etcd logs at warn and error
// level while it closes its own listeners on a normal Close ("setting up
// serving from embedded etcd failed" with "http: Server closed", "stopped
// secure grpc server due to error" with "use of closed network
// connection"): they are not failures, and an operator should not see
// errors on every shutdown. Before Close, every line goes through.
type shutdownQuiet struct {
	zapcore.Core
	closing *atomic.Bool
}

// quietOnShutdown returns the option wrapping a logger's core in
// shutdownQuiet.
func quietOnShutdown(closing *atomic.Bool) zap.Option {
	return zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &shutdownQuiet{Core: c, closing: closing} })
}

func (q *shutdownQuiet) With(fields []zapcore.Field) zapcore.Core {
	return &shutdownQuiet{Core: q.Core.With(fields), closing: q.closing}
}

func (q *shutdownQuiet) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if q.Enabled(ent.Level) {
		return ce.AddCore(ent, q)
	}
	return ce
}

func (q *shutdownQuiet) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if q.closing.Load() && closedListener(fields) || storageVersionRace(ent, fields) {
		return nil
	}
	return q.Core.Write(ent, fields)
}

// storageVersionRace reports etcd's "failed to update storage version"
// error while a fresh member has not yet written its term or conf state
// ("cannot detect storage schema version: missing term information"): the
// version monitor ran before bootstrap finished, and its next round
// succeeds. etcd's maintainers call it harmless and ignore it in their own
// no-error-logs test (etcd-io/etcd#18978); an operator should not see an
// error on a normal start.
func storageVersionRace(ent zapcore.Entry, fields []zapcore.Field) bool {
	if ent.Message != "failed to update storage version" {
		return false
	}
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType &&
			strings.Contains(err.Error(), "cannot detect storage schema version: missing") {
			return true
		}
	}
	return false
}

// closedListener reports whether a line's error is that of a listener or
// server closed on purpose.
func closedListener(fields []zapcore.Field) bool {
	for _, f := range fields {
		if f.Type != zapcore.ErrorType {
			continue
		}
		if err, ok := f.Interface.(error); ok {
			msg := err.Error()
			if strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "http: Server closed") ||
				strings.Contains(msg, "server stopped") {
				return true
			}
		}
	}
	return false
}
