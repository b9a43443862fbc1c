package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/internal/oauthtest"
)

// seenAuth is an upstream that answers the Authorization header it got
// and records it.
type seenAuth struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newSeenAuth(t *testing.T) *seenAuth {
	s := &seenAuth{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		s.mu.Lock()
		s.seen = append(s.seen, a)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"authorization": a})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *seenAuth) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

const upstreamAuthOps = `
adapters:
  rest: {command: %%s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: whoami
    description: The caller as the upstream sees it.
    adapter: rest
    upstream_auth:
      grant: token_exchange
      token_endpoint: %[1]s/token
      client_id: crank-gateway
      client_secret: s3cret-client-password
      audience: https://api.example.com
      scopes: [read]
    config: {method: GET, url: "%[2]s/me", headers: {Authorization: "Bearer {crank.upstream_token}"}}
  - name: service
    description: The gateway's own token.
    adapter: rest
    upstream_auth:
      grant: client_credentials
      token_endpoint: %[1]s/token
      client_id: crank-gateway
      client_secret: s3cret-client-password
      resource: https://api.example.com
    config: {method: GET, url: "%[2]s/svc", headers: {Authorization: "Bearer {crank.upstream_token}"}}
`

// Token exchange: the upstream sees a token the issuer exchanged for the
// caller's, for its audience, never the caller's; one exchange per
// caller token until it expires; the token is redacted from results.
// Client credentials: one token for every caller.
func TestUpstreamAuth(t *testing.T) {
	is := oauthtest.New(t)
	up := newSeenAuth(t)
	f, err := newFixture(t, fmt.Sprintf(upstreamAuthOps, is.URL, up.URL))
	if err != nil {
		t.Fatal(err)
	}
	callAs := func(tool, subject string) *host.Result {
		t.Helper()
		res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool(tool), SubjectToken: subject})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ann := is.Token("https://mcp.example.com/mcp", oauthtest.Claims{"sub": "ann", "scope": "mcp"})
	bob := is.Token("https://mcp.example.com/mcp", oauthtest.Claims{"sub": "bob", "scope": "mcp"})

	res := callAs("whoami", ann)
	if res.IsError {
		t.Fatalf("whoami: %s", res.Text)
	}
	ex := is.Exchanges()
	if len(ex) != 1 || ex[0].SubjectToken != ann || ex[0].Audience != "https://api.example.com" || ex[0].Scope != "read" {
		t.Fatalf("exchanges = %+v", ex)
	}
	if got := up.last(); got != "Bearer "+ex[0].Issued || strings.Contains(got, ann) {
		t.Errorf("the upstream saw %q, want the exchanged token", got)
	}
	if strings.Contains(res.Text, ex[0].Issued) || strings.Contains(string(res.Structured), ex[0].Issued) {
		t.Errorf("the upstream token is in the result: %s", res.Text)
	}
	claims := oauthtest.Decode(t, ex[0].Issued)
	if claims["sub"] != "ann" || fmt.Sprint(claims["aud"]) != "[https://api.example.com]" {
		t.Errorf("exchanged token claims = %v", claims)
	}

	callAs("whoami", ann) // cached
	callAs("whoami", bob) // another caller: another exchange
	if ex = is.Exchanges(); len(ex) != 2 || ex[1].SubjectToken != bob {
		t.Errorf("exchanges after ann again and bob = %d", len(ex))
	}
	if res := callAs("whoami", ""); !res.IsError || !strings.Contains(res.Text, "needs the caller's access token") {
		t.Errorf("whoami without a caller token = %+v", res)
	}

	callAs("service", ann)
	callAs("service", bob)
	ex = is.Exchanges()
	if len(ex) != 3 || ex[2].GrantType != "client_credentials" || ex[2].Resource != "https://api.example.com" || up.last() != "Bearer "+ex[2].Issued {
		t.Errorf("client credentials: %+v, upstream saw %q", ex[2:], up.last())
	}

	// The token endpoint refusing: a clear error, no secret in it.
	is.SetDown(true)
	carl := is.Token("https://mcp.example.com/mcp", oauthtest.Claims{"sub": "carl"})
	if res := callAs("whoami", carl); !res.IsError || !strings.Contains(res.Text, "could not be obtained") ||
		strings.Contains(res.Text, oauthtest.ClientSecret) || strings.Contains(res.Text, carl) {
		t.Errorf("whoami with the issuer down = %+v", res)
	}
}
