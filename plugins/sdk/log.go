package sdk

import (
	"context"
	"encoding/json"
	"slices"
)

// LogMessage is a log message an upstream sent for a call (an MCP
// upstream's notifications/message): the host relays it to the client
// that set a logging level, if the message's level is at or above it.
type LogMessage struct {
	// Level is an MCP logging level (LogLevels).
	Level string
	// Logger names the logger, possibly empty.
	Logger string
	// Data is the message as a JSON value.
	Data json.RawMessage
}

// LogLevels are MCP's logging levels (RFC 5424's), least severe first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// logLevelRank is the index of level in LogLevels, -1 when it is none.
func logLevelRank(level string) int { return slices.Index(LogLevels, level) }

// LogLevelAtLeast reports whether level is a logging level at or above
// min (both of LogLevels).
func LogLevelAtLeast(level, min string) bool {
	l, m := logLevelRank(level), logLevelRank(min)
	return l >= 0 && m >= 0 && l >= m
}

// WantsLog returns the lowest level of the log messages the host asked
// for the call whose context ctx is ("" when it asked for none): the
// client set a logging level and the adapter's Description says it relays
// logs. An adapter asks its upstream for log messages only then.
func WantsLog(ctx context.Context) string {
	if r, ok := ctx.Value(progressKey{}).(*progressReporter); ok {
		return r.logLevel
	}
	return ""
}

// ReportLog sends a log message of the call whose context ctx is to the
// host, in order with its progress reports (the call waits while the host
// reads). It does nothing (and returns nil) when the host did not ask for
// log messages or the message is below the level it asked for (or has no
// valid level), and returns ErrCallEnded or the host's error once the
// call has answered or the host has gone.
func ReportLog(ctx context.Context, m LogMessage) error {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	if !ok || r.logLevel == "" || !LogLevelAtLeast(m.Level, r.logLevel) {
		return nil
	}
	if len(m.Data) == 0 || !json.Valid(m.Data) {
		m.Data = json.RawMessage("null")
	}
	return r.report(func() error { return r.sendLog(m) })
}
