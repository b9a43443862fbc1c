package sdk_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// readmeCode returns the Go code blocks of the author guide.
func readmeCode(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go code")
	}
	return blocks
}

// TestREADMEExcerpts holds the guide to the example it quotes: every Go
// block but the complete program is a verbatim excerpt of filetail.
func TestREADMEExcerpts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("examples", "filetail", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the example's sources: %v", err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, block := range readmeCode(t) {
		if !strings.Contains(block, "package main") && !strings.Contains(src.String(), block) {
			t.Errorf("README.md quotes code that the example does not hold:\n%s", block)
		}
	}
}

// TestREADMEAdapter builds the guide's smallest adapter as a module of
// its own and runs it as the host does.
func TestREADMEAdapter(t *testing.T) {
	t.Parallel()
	var program string
	for _, block := range readmeCode(t) {
		if strings.Contains(block, "package main") {
			program = block
			break
		}
	}
	sdkDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(sdkDir, "examples", "filetail")
	mod, err := os.ReadFile(filepath.Join(example, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(example, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The example's requirements are the SDK's, and so are this one's.
	gomod := strings.NewReplacer(
		"module github.com/crankmcp/crank/plugins/sdk/examples/filetail", "module example.com/healthcheck",
		"=> ../../../../proto", "=> "+filepath.Join(filepath.Dir(filepath.Dir(sdkDir)), "proto"),
		"=> ../..", "=> "+sdkDir,
	).Replace(string(mod))
	dir := t.TempDir()
	for name, content := range map[string]string{"main.go": program, "go.mod": gomod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := adaptertest.Build(t, dir).Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d, err := h.Describe(ctx); err != nil || d.Name != "healthcheck" {
		t.Fatalf("describe: %+v %v", d, err)
	}
	diags, err := h.Validate(ctx, adaptertest.Call{Config: `{"uri": "http://billing:8080/healthz"}`})
	if err != nil || len(diags) != 2 || diags[0].Field != "uri" || diags[0].Message != `unknown field (did you mean "url"?)` {
		t.Fatalf("validate: %+v %v", diags, err)
	}
}
