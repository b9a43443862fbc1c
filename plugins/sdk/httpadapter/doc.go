// Package httpadapter is for adapters whose upstreams speak HTTP (REST,
// GraphQL, SOAP, the WebSocket handshake): it classifies a failed request
// as an *sdk.UpstreamError without quoting its URL ([Call]), reads answer
// bodies within a bound ([ReadBounded], [DrainAndClose]), checks the
// headers an operation config sets ([StaticHeaders], [ValidHeaderName],
// [ValidHeaderValue], [HopByHopHeader]) and keeps redirects within the
// first request's origin, so those headers never reach another host
// ([SameOriginRedirects]).
package httpadapter
