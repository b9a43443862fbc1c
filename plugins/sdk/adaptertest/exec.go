package adaptertest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Executable is an adapter executable built for tests.
type Executable struct {
	// Path is the executable's path.
	Path string
}

var builds struct {
	sync.Mutex
	m map[string]*build
}

type build struct {
	once sync.Once
	exe  *Executable
	err  string
}

// Build compiles the main package in dir (relative to the test's working
// directory, which is its package directory; it may be a module of its
// own) with the go tool, once per test process, and returns the
// executable. The test is skipped under -short and without a go tool.
// The executable is kept in the temporary directory, one per package
// directory, and rebuilt by the next test process that asks for it.
func Build(t testing.TB, dir string) *Executable {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an adapter executable")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the adapter")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	builds.Lock()
	if builds.m == nil {
		builds.m = map[string]*build{}
	}
	b := builds.m[abs]
	if b == nil {
		b = &build{}
		builds.m[abs] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		sum := sha256.Sum256([]byte(abs))
		out := filepath.Join(os.TempDir(), "crank-adaptertest", hex.EncodeToString(sum[:8]), filepath.Base(abs))
		cmd := exec.Command(goTool, "build", "-o", out, ".")
		cmd.Dir = abs
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = "adaptertest: go build " + dir + ": " + err.Error() + "\n" + string(msg)
			return
		}
		b.exe = &Executable{Path: out}
	})
	if b.err != "" {
		t.Fatal(b.err)
	}
	return b.exe
}

// Start launches the executable with args the way the host launches an
// adapter (go-plugin, AutoMTLS, gRPC) and returns a harness calling it.
// The process gets this process's environment and is killed when the test
// ends; its log goes to stderr from level Warn.
func (e *Executable) Start(t testing.TB, args ...string) *Harness {
	t.Helper()
	cmd := exec.Command(e.Path, args...)
	cmd.Env = os.Environ()
	p, err := client.Start(client.Config{
		Cmd:    cmd,
		Logger: hclog.New(&hclog.LoggerOptions{Name: filepath.Base(e.Path), Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatalf("adaptertest: start %s: %v", e.Path, err)
	}
	t.Cleanup(p.Kill)
	h := &Harness{Client: p.Client, Process: p}
	h.Client.OnSpans(h.collect)
	return h
}
