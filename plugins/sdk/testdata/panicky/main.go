// Command panicky is an adapter whose calls panic with a secret in the
// panic's value, for the test that the secret reaches neither the host's
// error nor the adapter's log (recover_test.go).
package main

import (
	"context"
	"errors"
	"log"

	"github.com/crankmcp/crank/plugins/sdk"
)

// secret is what a config value of a real adapter could be.
const secret = "s3cret-token-4711"

type adapter struct{}

func (adapter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "panicky", Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}}, nil
}

// Invoke panics in the call the SDK made: a string value.
func (adapter) Invoke(context.Context, *sdk.Request) (*sdk.Result, error) {
	panic("token " + secret + " refused")
}

// ExpandOperation panics in the call the SDK made: an error value.
func (adapter) ExpandOperation(context.Context, *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	panic(errors.New("token " + secret + " refused"))
}

// Stream panics in a goroutine of its own, recovered by sdk.Recover.
func (adapter) Stream(ctx context.Context, _ *sdk.Request, _ sdk.StreamSender) error {
	done := make(chan error, 1)
	go func() {
		done <- func() (err error) {
			defer sdk.Recover("panicky: reader", &err)
			panic(struct{ Token string }{secret})
		}()
	}()
	return <-done
}

func main() {
	if err := sdk.Serve(adapter{}); err != nil {
		log.Fatal(err)
	}
}
