package sdk

import (
	"fmt"
	"os"
	"runtime/debug"
)

// PanicError is a panic that Recover caught in a goroutine of the
// adapter's own.
type PanicError struct {
	// Where names the goroutine, as given to Recover.
	Where string
}

func (e *PanicError) Error() string {
	return e.Where + ": internal error (panic), see the adapter log"
}

// Recover, deferred directly in a goroutine the adapter starts itself,
// turns a panic of that goroutine into a *PanicError in *err (err may be
// nil) and writes the panic's type and stack to the adapter log (stderr;
// not the panic's value, which may hold a config value or an argument).
// The SDK recovers a panic of the calls it makes into the adapter (the
// call fails with an internal error), but a panic in any other goroutine
// ends the adapter process and every call in flight with it:
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
	fmt.Fprintf(os.Stderr, "%s: panic: %T\n%s", where, r, debug.Stack())
	if err != nil {
		*err = &PanicError{Where: where}
	}
}
