package websocket_test

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestTLSHeadersCompression connects over wss:// trusting the server's
// certificate through tls.ca_file (relative to the operations file's
// directory), sends the configured headers and subprotocol, and
// negotiates compression.
func TestTLSHeadersCompression(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		c, err := ws.Accept(w, r, &ws.AcceptOptions{Subprotocols: []string{"feed.v1"}, CompressionMode: ws.CompressionNoContextTakeover})
		if err != nil {
			return
		}
		defer c.CloseNow()
		big := `{"text":"` + strings.Repeat("compressible ", 200) + `","sub":"` + c.Subprotocol() + `","deflate":"` + r.Header.Get("Sec-WebSocket-Extensions") + `"}`
		_ = c.Write(r.Context(), ws.MessageText, []byte(big))
		c.Close(ws.StatusNormalClosure, "")
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	url := "wss" + strings.TrimPrefix(srv.URL, "https") + "/feed"
	cfg := map[string]any{
		"url":          url,
		"subprotocols": []string{"feed.v1"},
		"headers":      map[string]any{"Authorization": "Bearer t0ken"},
		"tls":          map[string]any{"ca_file": "ca.pem", "server_name": "example.com"},
		"compression":  "no_context_takeover",
	}
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: cfg, BaseDir: dir}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(events, ue)
	if len(got) != 2 || !strings.Contains(got[0], `"sub":"feed.v1"`) || !strings.Contains(got[0], `"deflate":"permessage-deflate`) || got[1] != "end" {
		t.Fatalf("events: %.300q", got)
	}

	// Without the CA the handshake fails, and the error names neither the
	// token nor the query.
	delete(cfg, "tls")
	cfg["url"] = url + "?key=s3cret"
	events, ue, err = h.Stream(ctxT(t), adaptertest.Call{Config: cfg}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got = summarize(events, ue)
	if len(got) != 1 || !strings.HasPrefix(got[0], "error transport: cannot connect: tls: failed to verify certificate") ||
		strings.Contains(got[0], "t0ken") || strings.Contains(got[0], "s3cret") {
		t.Fatalf("events: %q", got)
	}
}
