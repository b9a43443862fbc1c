package soap_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/soap"
)

// The benchmarks call the same loopback SOAP service two ways so the
// adapter's overhead reads as a ratio:
//
//	BenchmarkSOAPDirect  a plain net/http POST of a prebuilt envelope and
//	                     reading the answer (the floor)
//	BenchmarkSOAPInvoke  the adapter through adaptertest: envelope building,
//	                     the call, normalisation and the plugin protocol

const benchEnvelope = `<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" xmlns:ns1="urn:crank:orders"><soap:Body><ns1:LookupOrder><ns1:orderId>12</ns1:orderId></ns1:LookupOrder></soap:Body></soap:Envelope>`

func BenchmarkSOAPDirect(b *testing.B) {
	srv := newSOAPServer(b)
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/soap", strings.NewReader(benchEnvelope))
		req.Header.Set("Content-Type", "text/xml; charset=utf-8")
		req.Header.Set("SOAPAction", `"urn:crank:calc/LookupOrder"`)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "SHIPPED") {
			b.Fatalf("answer: %s", body)
		}
	}
}

func BenchmarkSOAPInvoke(b *testing.B) {
	srv := newSOAPServer(b)
	h := adaptertest.New(b, soap.New())
	cfg, _ := json.Marshal(map[string]any{"wsdl": "service.wsdl", "port": "Soap11", "endpoint": srv.URL + "/soap", "operation": "LookupOrder"})
	call := adaptertest.Call{Config: json.RawMessage(cfg), Args: json.RawMessage(`{"orderId":12}`), BaseDir: "testdata"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, ue, err := h.Invoke(ctx, call)
		if err != nil || ue != nil || !strings.Contains(string(res.Structured), "SHIPPED") {
			b.Fatalf("invoke: %v %v", err, ue)
		}
	}
}
