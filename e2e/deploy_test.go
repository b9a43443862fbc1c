package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// The deployment files in deploy/ hold together offline: every manifest
// parses with a kind, the ConfigMap's Caddyfile adapts and validates
// with the crank binary (with its operations file), and the Deployment's
// probes point at a listener and a path the Caddyfile serves.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	var docs []map[string]any
	for _, f := range []string{"crank.yaml", "etcd.yaml"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc["apiVersion"] == nil || doc["kind"] == nil {
				t.Fatalf("%s: a document without apiVersion or kind: %v", f, doc)
			}
			docs = append(docs, doc)
		}
	}
	get := func(m any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				mm, _ := m.(map[string]any)
				m = mm[k]
			case int:
				s, _ := m.([]any)
				if k >= len(s) {
					return nil
				}
				m = s[k]
			}
		}
		return m
	}
	var caddyfile, ops string
	var deployment map[string]any
	kinds := map[string]bool{}
	for _, d := range docs {
		kinds[d["kind"].(string)] = true
		switch d["kind"] {
		case "ConfigMap":
			caddyfile, _ = get(d, "data", "Caddyfile").(string)
			ops, _ = get(d, "data", "operations.yaml").(string)
		case "Deployment":
			deployment = d
		}
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service", "StatefulSet"} {
		if !kinds[k] {
			t.Errorf("no %s in deploy/kubernetes", k)
		}
	}
	if caddyfile == "" || ops == "" || deployment == nil {
		t.Fatal("the ConfigMap needs a Caddyfile and operations.yaml, and a Deployment must run them")
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "operations.yaml"), ops)
	writeFile(t, filepath.Join(dir, "Caddyfile"), strings.ReplaceAll(caddyfile, "/etc/crank/", dir+"/"))
	cmd := exec.Command(crankBin, "adapt", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile", "--validate")
	cmd.Env = append(os.Environ(), "POD_NAME=crank-0", "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("the ConfigMap's Caddyfile does not adapt: %v\n%s", err, ee.Stderr)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string        `json:"listen"`
					Routes json.RawMessage `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	container := get(deployment, "spec", "template", "spec", "containers", 0)
	ports := map[string]int{}
	for _, p := range get(container, "ports").([]any) {
		ports[get(p, "name").(string)] = get(p, "containerPort").(int)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		path, _ := get(container, probe, "httpGet", "path").(string)
		port, _ := get(container, probe, "httpGet", "port").(string)
		listen := ":" + strconv.Itoa(ports[port])
		found := false
		for _, s := range cfg.Apps.HTTP.Servers {
			if !slices.Contains(s.Listen, listen) {
				continue
			}
			found = found || strings.Contains(string(s.Routes), `"path":["`+path+`"]`)
		}
		if !found {
			t.Errorf("%s: no route for %s on %s in the adapted Caddyfile:\n%s", probe, path, listen, out)
		}
	}
	if !strings.Contains(string(out), `"crank"`) || !strings.Contains(string(out), `"replica_name":"crank-0"`) {
		t.Errorf("the adapted Caddyfile has no crank handler or replica name: %s", out)
	}
}
