package sdk

import (
	"context"
	"strings"
	"testing"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A 2-byte rune cut in half at the limit is dropped, not mangled.
	long := strings.Repeat("a", ExcerptBytes-1) + "\xc3\xa9tail"
	if s := Excerpt(ctx, []byte(long)); s != strings.Repeat("a", ExcerptBytes-1)+TruncatedNote {
		t.Errorf("excerpt ends %q", s[len(s)-80:])
	}
	if s := Excerpt(ctx, []byte("ok\xff")); s != "ok\uFFFD" {
		t.Errorf("invalid UTF-8 = %q", s)
	}
	// The host's margin: the answer is kept that much longer, for the
	// host to redact before it cuts.
	mctx := withOperation(ctx, &Operation{ExcerptMargin: 40})
	body := strings.Repeat("b", ExcerptBytes+100)
	if s := Excerpt(mctx, []byte(body)); s != body[:ExcerptBytes+40]+TruncatedNote {
		t.Errorf("with a margin: %d bytes", len(s))
	}
	if ExcerptLimit(mctx) != ExcerptBytes+40 || ExcerptLimit(ctx) != ExcerptBytes {
		t.Error("ExcerptLimit")
	}
}
