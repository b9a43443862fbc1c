package sdk_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

func TestNaming(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, title, verb string }{
		{"GetOrder", "Get order", "read"},
		{"order_GetOrder", "Order get order", "read"},
		{"list_users", "List users", "read"},
		{"GetHTTPStatus", "Get HTTP status", "read"},
		{"batch_GetBatchStatus", "Batch get batch status", "read"},
		{"order_lookup_soap12", "Order lookup soap12", "read"},
		{"api_delete_user", "Api delete user", "destroy"},
		{"RefundOrder", "Refund order", ""},
		{"Presence", "Presence", ""},
		{"WatchEvents", "Watch events", "read"},
		{"SubmitBatch", "Submit batch", "write"},
		{"crank.demo.v1.Directory", "Crank demo v1 directory", ""},
	} {
		if got := sdk.Humanize(c.name); got != c.title {
			t.Errorf("Humanize(%q) = %q, want %q", c.name, got, c.title)
		}
		if got := sdk.Verb(c.name); got != c.verb {
			t.Errorf("Verb(%q) = %q, want %q (words %s)", c.name, got, c.verb, strings.Join(sdk.Words(c.name), ","))
		}
	}
	if a := sdk.NameAnnotations("GetOrder"); a.ReadOnly == nil || !*a.ReadOnly || a.Idempotent == nil || !*a.Idempotent {
		t.Errorf("GetOrder: %+v", a)
	}
	if a := sdk.NameAnnotations("Divide"); a.ReadOnly != nil || a.Destructive != nil {
		t.Errorf("Divide: %+v", a)
	}
}
