package auth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/oauthtest"
)

func newUpstream(t *testing.T, is *oauthtest.Issuer, grant string) *Upstream {
	t.Helper()
	u, err := NewUpstream(UpstreamConfig{Grant: grant, TokenEndpoint: is.URL + "/token", ClientID: oauthtest.ClientID,
		ClientSecret: oauthtest.ClientSecret, Audience: "https://api.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Concurrent calls for one caller share one exchange; a failed request
// is not kept; a token is renewed once it is near its expiry.
func TestUpstreamTokens(t *testing.T) {
	is := oauthtest.New(t)
	u := newUpstream(t, is, GrantTokenExchange)
	subject := is.Token(testResource, oauthtest.Claims{"sub": "ann"})
	ctx := context.Background()

	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			tok, err := u.Token(ctx, subject)
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	wg.Wait()
	if ex := is.Exchanges(); len(ex) != 1 || got[0] != ex[0].Issued || got[7] != got[0] {
		t.Fatalf("8 concurrent calls made %d exchanges", len(ex))
	}

	is.SetDown(true)
	other := is.Token(testResource, oauthtest.Claims{"sub": "bob"})
	if _, err := u.Token(ctx, other); err == nil || !strings.Contains(err.Error(), "refused the token_exchange request: 503") {
		t.Errorf("token endpoint down: %v", err)
	}
	is.SetDown(false)
	if _, err := u.Token(ctx, other); err != nil {
		t.Errorf("after the endpoint is back: %v", err)
	}

	is.SetTokenLife(2 * time.Second) // renewed after half its life
	third := is.Token(testResource, oauthtest.Claims{"sub": "carl"})
	first, err := u.Token(ctx, third)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tok, err := u.Token(ctx, third)
		if err != nil {
			t.Fatal(err)
		}
		if tok != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the token was not renewed near its expiry")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if _, err := u.Token(ctx, ""); err != ErrNoSubjectToken {
		t.Errorf("no subject token: %v", err)
	}
}

// The token endpoint's refusal is reported with its error code and
// description; a client-credentials token does not depend on the caller.
func TestUpstreamClientCredentials(t *testing.T) {
	is := oauthtest.New(t)
	u := newUpstream(t, is, GrantClientCredentials)
	a, err := u.Token(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Token(context.Background(), "any caller's token")
	if err != nil || a != b || len(is.Exchanges()) != 1 {
		t.Errorf("client credentials per caller: %v %d requests", err, len(is.Exchanges()))
	}

	bad, err := NewUpstream(UpstreamConfig{Grant: GrantClientCredentials, TokenEndpoint: is.URL + "/token", ClientID: "intruder",
		ClientSecret: "guess", Audience: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Token(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "guess") {
		t.Errorf("a refused client: %v", err)
	}
}

// A token endpoint that redirects its POST (307, 308) does not get the
// form sent again elsewhere: the client secret and the caller's token
// stay with the endpoint configured.
func TestUpstreamTokenEndpointRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token": "stolen", "token_type": "Bearer", "expires_in": 60}`)
	}))
	defer elsewhere.Close()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/token", status)
		}))
		u, err := NewUpstream(UpstreamConfig{Grant: GrantTokenExchange, TokenEndpoint: redirecting.URL + "/token", ClientID: "crank",
			ClientSecret: "the-client-secret", Audience: "https://api.example.com"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = u.Token(context.Background(), "the-callers-token")
		redirecting.Close()
		if err == nil || !strings.Contains(err.Error(), "is not followed") {
			t.Errorf("%d: %v", status, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Fatalf("the form reached another server: %q", seen)
	}
}
