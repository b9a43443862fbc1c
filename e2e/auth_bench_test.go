package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/oauthtest"
)

// BenchmarkUnaryAuth measures what endpoint authorization adds to a unary
// REST tool call: the same gateway and operations with no auth, and with
// a resource server (a JWT checked against the issuer's keys, its
// verification cached per token) and a three-rule CEL policy, measured in
// the same run. It prints p50 latencies and their ratio (goal: under 5%
// added).
func BenchmarkUnaryAuth(b *testing.B) {
	is := oauthtest.New(b)
	up := newAuthUpstream(b)
	plain := startGateway(b, gatewayOptions{Operations: authOps(up.URL, is.URL),
		Env: []string{"CRANK_E2E_CLIENT_SECRET=" + oauthtest.ClientSecret}})
	authed := startGateway(b, gatewayOptions{Operations: authOps(up.URL, is.URL), Handler: authHandler(is.URL),
		Env: []string{"CRANK_E2E_CLIENT_SECRET=" + oauthtest.ClientSecret}})
	ctx := context.Background()
	token := is.Token(authed.MCPURL, oauthtest.Claims{"scope": "mcp", "sub": "bench", "groups": []string{"staff"}, "exp": time.Now().Add(time.Hour).Unix()})

	p50 := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"no-auth", plain.connect(ctx)},
		{"auth-policy", authed.connectBearer(ctx, token)},
	} {
		call := func() error {
			res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %s", textOf(res))
			}
			return err
		}
		b.Run(c.name, func(b *testing.B) {
			for range 50 {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
	if p50["no-auth"] == 0 || p50["auth-policy"] == 0 {
		return
	}
	fmt.Printf("\nunary REST tool call, same run: no auth p50 %v, bearer token + 3-rule policy p50 %v: ratio %.3f (goal: < 1.05)\n",
		p50["no-auth"], p50["auth-policy"], float64(p50["auth-policy"])/float64(p50["no-auth"]))
}
