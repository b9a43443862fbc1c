package host

import (
	"fmt"

	"go.uber.org/zap"
)

// runnerPanic is the cancel cause of a session or job runner that
// panicked: the entity fails with internal_error instead of the panic
// ending the process.
type runnerPanic struct{ msg string }

func (p *runnerPanic) Error() string { return p.msg }

// recovered logs a panic recovered in a runner of kind ("session", "job")
// with its stack, and returns the failure the client is told of (the
// details stay in the log).
func (h *Host) recovered(kind, id string, v any) *runnerPanic {
	h.log.Error("internal error in a "+kind+" runner, recovered: the "+kind+" fails",
		zap.String(kind, id), zap.String("panic", h.redact.String(fmt.Sprint(v))), zap.Stack("stack"))
	return &runnerPanic{msg: fmt.Sprintf("an internal error stopped the %s %s (the gateway log has the details)", kind, id)}
}
