package mcp

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// A 10 MiB result, over the default bound of 8 MiB, is a clear error (the
// adapter stops reading at the bound), over Streamable HTTP and over stdio; a result
// within max_message_bytes passes, and the next call works.
func TestResultSizeBound(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	for name, base := range transports(t, up) {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			_, ue := call(t, h, base, "big", `{"n": 10485760}`, 60*time.Second)
			if ue == nil || ue.Kind != sdk.KindBadResponse || !strings.Contains(ue.Message, "larger than max_message_bytes (8388608 bytes)") {
				t.Fatalf("10 MiB result: %+v", ue)
			}
			if res, ue := call(t, h, base, "echo", `{"text": "after"}`, 20*time.Second); ue != nil || string(res.Structured) != `{"echo":"after"}` {
				t.Fatalf("next call: %+v %+v", res, ue)
			}
			small := map[string]any{"max_message_bytes": 4096}
			for k, v := range base {
				small[k] = v
			}
			if _, ue := call(t, h, small, "big", `{"n": 5000}`, 20*time.Second); ue == nil || !strings.Contains(ue.Message, "(4096 bytes)") {
				t.Fatalf("5000 bytes over 4096: %+v", ue)
			}
			if res, ue := call(t, h, small, "big", `{"n": 3000}`, 20*time.Second); ue != nil || len(res.Text) != 3000 {
				t.Fatalf("3000 bytes within 4096: %+v", ue)
			}
		})
	}
}

func TestMaxMessageBytesConfig(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{{-1, "must be from 0 to 50331648, got -1"}, {1 << 30, "must be from 0 to 50331648, got 1073741824"}} {
		p := newAdapter().configs.Fresh(&sdk.Operation{Name: "x", Config: []byte(fmt.Sprintf(`{"url":"http://h/mcp","max_message_bytes":%v}`, c.v))})
		d := p.Diagnostics()
		if len(d) != 1 || d[0].Field != "max_message_bytes" || !strings.Contains(d[0].Message, c.want) {
			t.Errorf("%v: %+v", c.v, d)
		}
	}
}

// Frames end at a line over stdio and at a blank line over HTTP, however
// the reads split them.
func TestFrameLimiter(t *testing.T) {
	for _, c := range []struct {
		perLine bool
		in      string
		tooBig  bool
	}{
		{true, "12345\n12345\n12345\n", false},
		{true, "123456789012\n", true},
		{false, "data: 1\n\ndata: 2\n\n", false},
		{false, "data: 1\r\n\r\ndata: 2\r\n\r\n", false},
		{false, "data: 1\ndata: 2\n\n", true},
		{false, "1234567890123", true},
	} {
		var marked atomic.Bool
		f := &frameLimiter{r: io.NopCloser(iotest.OneByteReader(strings.NewReader(c.in))), max: 12, perLine: c.perLine, marked: &marked}
		out, err := io.ReadAll(f)
		if tooBig := errors.Is(err, errTooLarge); tooBig != c.tooBig || marked.Load() != c.tooBig || !c.tooBig && string(out) != c.in {
			t.Errorf("%q (per line %v): %q %v", c.in, c.perLine, out, err)
		}
	}
}
