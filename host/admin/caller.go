package admin

import "context"

type callerKey struct{}

// WithCaller returns ctx carrying the identity a request is attributed to
// when it comes through a front end of the admin API served on a site
// (the operator console: "console:<user>"), in place of Caddy's admin
// identity.
func WithCaller(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, callerKey{}, who)
}

// CallerOf is the identity WithCaller put in ctx, or "".
func CallerOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}
