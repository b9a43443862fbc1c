package sdk_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

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

func TestPortableName(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := strings.Repeat("drive.files.", 10)
	for _, c := range []struct{ in, want string }{
		{"drive.files.list", "drive_files_list"},
		{"get_pets-v2", "get_pets-v2"},
		{"café/ü", "caf___"},
		{"", "_"},
	} {
		if got := sdk.PortableName(c.in, 0); got != c.want {
			t.Errorf("sdk.PortableName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	a, b := sdk.PortableName(long+"get", 0), sdk.PortableName(long+"list", 0)
	if a == b || len(a) != 64 || !re.MatchString(a) || !re.MatchString(b) {
		t.Errorf("cut names %q and %q: want 64 portable characters each, apart", a, b)
	}
	if got := sdk.PortableName(long, 20); len(got) != 20 || !re.MatchString(got) {
		t.Errorf("sdk.PortableName(long, 20) = %q", got)
	}
}

func TestCapDescription(t *testing.T) {
	t.Parallel()
	short := "Lists pets."
	if got := sdk.CapDescription(short, 20); got != short {
		t.Errorf("a short description changed: %q", got)
	}
	doc := "Lists pets.\n\nThe pets are those the store has. " + strings.Repeat("More words here. ", 100)
	if got := sdk.CapDescription(doc, 100); got != "Lists pets.\n\n…" {
		t.Errorf("sdk.CapDescription(doc, 100) = %q", got)
	}
	one := strings.Repeat("word ", 100)
	got := sdk.CapDescription(one, 50)
	if n := utf8.RuneCountInString(got); n > 50 || !strings.HasSuffix(got, "word…") {
		t.Errorf("sdk.CapDescription(one paragraph, 50) = %q (%d characters)", got, n)
	}
	for _, max := range []int{10, 64, 1024} {
		if n := utf8.RuneCountInString(sdk.CapDescription(doc+"\n\nü"+one, max)); n > max {
			t.Errorf("max %d: %d characters", max, n)
		}
	}
}
