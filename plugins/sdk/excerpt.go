package sdk

import (
	"context"
	"strings"
	"unicode/utf8"
)

// ExcerptBytes bounds an excerpt of an upstream's answer in an error
// (UpstreamError.Body): the host shows at most this many bytes of it.
const ExcerptBytes = 2 << 10

// TruncatedNote ends an excerpt whose answer was longer than shown.
const TruncatedNote = "\n[truncated: only the first 2048 bytes of the answer are shown]"

// Excerpt is an upstream's answer b as valid UTF-8 text for an
// UpstreamError's Body — the one function every adapter's excerpts go
// through. It keeps ExcerptBytes of b plus the call's excerpt margin
// (Operation.ExcerptMargin, which the SDK puts in ctx): the host redacts
// the secrets it knows from the excerpt and only then cuts it to
// ExcerptBytes, so that no cut, the adapter's or the host's, leaves a
// fragment of a secret. A cut excerpt ends with TruncatedNote. ctx is
// the call's (or one derived from it, such as an upstream request's).
func Excerpt(ctx context.Context, b []byte) string {
	limit := ExcerptLimit(ctx)
	truncated := len(b) > limit
	if truncated {
		b = b[:limit]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		s += TruncatedNote
	}
	return s
}

// ExcerptLimit is how many bytes of an answer Excerpt keeps for the call
// of ctx: ExcerptBytes and the call's margin.
func ExcerptLimit(ctx context.Context) int { return ExcerptBytes + excerptMargin(ctx) }

type excerptKey struct{}

// withOperation is ctx for serving a request of op: its excerpt margin.
func withOperation(ctx context.Context, op *Operation) context.Context {
	if op.ExcerptMargin <= 0 {
		return ctx
	}
	return context.WithValue(ctx, excerptKey{}, op.ExcerptMargin)
}

func excerptMargin(ctx context.Context) int {
	n, _ := ctx.Value(excerptKey{}).(int)
	return n
}
