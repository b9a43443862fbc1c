package meshtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Stream is what mcp-mesh's stream consumers read of a response (the
// rules of shared/spec/streaming-wire-contract.md): the chunks of the
// progress notifications that carry their token, and the final message
// whose id is theirs.
type Stream struct {
	Chunks   []string
	Progress []float64
	Final    map[string]json.RawMessage
	// After counts progress notifications after the final message.
	After int
	// ContentType is the response's.
	ContentType string
}

// ReadStream reads a tools/call response as the Java consumer
// (McpHttpClient.streamTool) does, with the TypeScript consumer's strict
// id equality when strict: an SSE stream only (anything else yields no
// chunks and no final message, as the Java consumer fails on it); data
// lines with or without a space, joined with \n; event: and id: lines
// ignored; data that is not JSON skipped; the chunk from params.message,
// else params.data, of a notifications/progress whose token equals token;
// the end at the first message whose id equals id (for Java also the
// same number as a string).
func ReadStream(resp *http.Response, token, id json.RawMessage, strict bool) Stream {
	s := Stream{ContentType: resp.Header.Get("Content-Type")}
	if !strings.HasPrefix(s.ContentType, "text/event-stream") {
		_, _ = io.Copy(io.Discard, resp.Body)
		return s
	}
	var data []string
	dispatch := func() {
		if len(data) == 0 {
			return
		}
		var msg map[string]json.RawMessage
		raw := strings.Join(data, "\n")
		data = nil
		if json.Unmarshal([]byte(raw), &msg) != nil {
			return
		}
		if string(msg["method"]) == `"notifications/progress"` {
			var p struct {
				ProgressToken json.RawMessage `json:"progressToken"`
				Progress      float64         `json:"progress"`
				Message       *string         `json:"message"`
				Data          *string         `json:"data"`
			}
			if json.Unmarshal(msg["params"], &p) != nil || !bytes.Equal(p.ProgressToken, token) {
				return
			}
			if s.Final != nil {
				s.After++
				return
			}
			chunk := p.Data
			if p.Message != nil {
				chunk = p.Message
			}
			if chunk != nil {
				s.Chunks = append(s.Chunks, *chunk)
				s.Progress = append(s.Progress, p.Progress)
			}
			return
		}
		got, ok := msg["id"]
		if !ok || s.Final != nil {
			return
		}
		same := bytes.Equal(got, id)
		if !strict && !same {
			same = strings.Trim(string(got), `"`) == strings.Trim(string(id), `"`)
		}
		if same {
			s.Final = msg
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			dispatch()
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	dispatch()
	return s
}

// Post posts body to url as mcp-mesh's consumers call a tool: no
// initialize, no Mcp-Session-Id, no MCP-Protocol-Version, an
// X-Mesh-Timeout of 30 seconds, and the header pairs hdr.
func Post(url, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Mesh-Timeout", "30")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}
