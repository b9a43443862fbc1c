package sdk

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PanicError is a panic that the SDK or Recover caught: the error the host
// or the adapter sees in its place. It never holds the panic's value.
type PanicError struct {
	// Where names the call or goroutine, as given to Recover.
	Where string
}

func (e *PanicError) Error() string {
	return e.Where + ": internal error (panic), see the adapter log"
}

// Recover, deferred directly in a goroutine the adapter starts itself,
// turns a panic of that goroutine into a *PanicError in *err (err may be
// nil) and writes the panic's type and stack to the adapter log (Serve's
// logger, which the host logs, at level Error; never the panic's value,
// which may hold a config value, a secret or an argument). The SDK recovers a panic of every call it makes into the
// adapter in the same way (the call fails with that internal error; an
// adapter needs no recover of its own there), but a panic in any other
// goroutine ends the adapter process and every call in flight with it:
//
//	func (r *reader) run(ctx context.Context) (err error) {
//		defer sdk.Recover("my adapter: reader", &err)
//		return r.loop(ctx)
//	}
//
//	go func() { done <- r.run(ctx) }()
//
// A Stream that returns the error ends with an internal error, as if
// Stream itself had panicked.
func Recover(where string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	pe := panicked(where, r)
	if err != nil {
		*err = pe
	}
}

// recoverPanic, deferred directly in a method of the gRPC server, turns a
// panic of the adapter code it calls into an INTERNAL error of the call,
// so one bad request does not take the adapter process down.
func recoverPanic(method string, err *error) {
	if r := recover(); r != nil {
		*err = status.Error(codes.Internal, panicked(method, r).Error())
	}
}

// adapterLog is the logger of the latest Serve, nil before Serve. Not
// os.Stderr: once served, go-plugin sends what the process writes there
// to a stream the host does not log.
var adapterLog atomic.Pointer[hclog.Logger]

// panicked writes the panic r of where to the adapter log, its type and
// stack but not its value, and returns the error that stands for it.
func panicked(where string, r any) *PanicError {
	if l := adapterLog.Load(); l != nil {
		(*l).Error("recovered a panic", "where", where, "panic_type", fmt.Sprintf("%T", r), "stack", string(debug.Stack()))
	} else {
		fmt.Fprintf(os.Stderr, "%s: recovered a panic: %T\n%s", where, r, debug.Stack())
	}
	return &PanicError{Where: where}
}
