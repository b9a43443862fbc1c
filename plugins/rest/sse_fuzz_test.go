package rest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	sse "github.com/tmaxmax/go-sse"
)

// FuzzEventReader checks the bounded SSE reader on arbitrary streams: it
// never panics or hangs, never yields an event larger than its limit, and
// when no event is over the limit it reads exactly what go-sse reads
// unbounded. Seeds: testdata/fuzz/FuzzEventReader.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{
		"data: 1\n\n",
		"id: 1\ndata: {\"a\":1}\n\nid: 2\r\ndata: x\r\n\r\n",
		"event: log\ndata: a\ndata: b\n\n: comment\n\ndata: [DONE]\n\n",
		"data: " + strings.Repeat("x", 100) + "\n\ndata: after\n\n",
		"data: " + strings.Repeat("y", 70) + "\r\rdata: z\r\r",
		"\xef\xbb\xbfdata: bom\n\n",
		"data: torn",
		"id: a\x00b\ndata: nul id\n\n",
		"retry: 10\n\ndata:no space\n\n",
	} {
		f.Add([]byte(s))
	}
	const limit = 64
	f.Fuzz(func(t *testing.T, in []byte) {
		var got []sseEvent
		err := newEventReader(bytes.NewReader(in), limit).each(func(ev sseEvent) bool {
			got = append(got, ev)
			return len(got) < 10000
		})
		if err != nil {
			return // only reader errors, never a panic
		}
		skipped := false
		for _, ev := range got {
			if ev.tooLarge {
				skipped = true
				continue
			}
			if len(ev.data) > limit {
				t.Fatalf("event of %d bytes passed a %d-byte limit", len(ev.data), limit)
			}
			var v any
			if json.Unmarshal(eventJSON(ev.data), &v) != nil {
				t.Fatalf("eventJSON(%q) is not JSON", ev.data)
			}
		}
		if skipped {
			return
		}
		// Nothing was over the limit: the same events as go-sse unbounded.
		var want []sseEvent
		for ev, err := range sse.Read(bytes.NewReader(in), &sse.ReadConfig{MaxEventSize: len(in) + 1024}) {
			if err != nil {
				return
			}
			want = append(want, sseEvent{typ: ev.Type, data: ev.Data, id: ev.LastEventID})
		}
		if len(want) > 10000 {
			return
		}
		if len(want) != len(got) {
			t.Fatalf("%d events, go-sse reads %d", len(got), len(want))
		}
		for i := range want {
			if want[i].typ != got[i].typ || want[i].data != got[i].data || want[i].id != "" && want[i].id != got[i].id {
				t.Fatalf("event %d = %+v, go-sse reads %+v", i, got[i], want[i])
			}
		}
	})
}

// TestSkipper checks the blank-line finder on every line-end style.
func TestSkipper(t *testing.T) {
	for _, c := range []struct {
		in string
		// stop is the bytes consumed through the first line end of the
		// blank line (a CRLF's LF left over is a blank line go-sse skips).
		stop int
	}{
		{"abc\n\nrest", 5},
		{"abc\r\rrest", 5},
		{"abc\r\n\r\nrest", 6},
		{"abc\r\n\nrest", 6},
		{"abc\n\r\nrest", 5},
		{"\n\n", 2},
		{"abc\r\nx\r\n\r\n", 9},
	} {
		var s skipper
		n := 0
		for i := 0; i < len(c.in) && !s.done; i++ {
			s.feed(c.in[i])
			n = i + 1
		}
		if !s.done || n != c.stop {
			t.Errorf("%q: done=%v after %d bytes, want %d", c.in, s.done, n, c.stop)
		}
		// scan agrees, whole and in pieces of every size.
		for size := 1; size <= len(c.in); size++ {
			var s skipper
			n := 0
			for n < len(c.in) && !s.done {
				n += s.scan([]byte(c.in[n:min(n+size, len(c.in))]))
			}
			if !s.done || n != c.stop {
				t.Errorf("%q in pieces of %d: scan done=%v after %d bytes, want %d", c.in, size, s.done, n, c.stop)
			}
		}
	}
}
