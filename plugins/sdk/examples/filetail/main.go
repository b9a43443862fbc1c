// Command crank-adapter-filetail is a Crank adapter that serves a local
// text file, such as a log, as MCP tools: a unary tool answers the file's
// last lines, a window or session tool follows it as tail -f does.
//
// It is the example adapter of the Crank adapter SDK
// (github.com/crankmcp/crank/plugins/sdk, whose README is the author
// guide): a whole adapter in a module of its own, with its tests.
//
// Build it and name it in an operations file:
//
//	go build -o crank-adapter-filetail .
//
//	adapters:
//	  filetail: {command: ./crank-adapter-filetail}   # relative to this file
//	operations:
//	  - name: app_log
//	    description: The last lines of the application log.
//	    adapter: filetail
//	    config: {path: logs/app.log}                  # relative to this file
//	  - name: app_log_watch
//	    description: The lines written to the application log meanwhile.
//	    adapter: filetail
//	    mode: window
//	    limits: {window_duration_ms: 10000, max_items: 200}
//	    config: {path: logs/app.log, poll_interval: 100ms}
//
// # Config
//
//	path: logs/app.log     # required; the file served, never an argument
//	max_lines: 1000        # the most lines a call may ask for
//	max_line_bytes: 4096   # longer lines are cut to this many bytes
//	poll_interval: 250ms   # how often a stream looks for new lines
//
// # Tools
//
// A unary tool takes {"lines": n} (default 10) and answers
// {"lines": [...], "cursor": "<offset>"}: the last n complete lines (a
// line counts once its line end is written) and the byte offset after
// them.
//
// A window or session tool sends every line as an item {"line": "..."}
// whose cursor is the byte offset after it. A fresh stream starts "lines"
// lines before the end (default 0: new lines only); one given a cursor
// (req.Cursor: behind the gateway, where a previous window ended, since
// the gateway takes back only the cursors its windows returned) resumes
// there. When the file
// shrinks (truncated) or another file takes its path (rotated), the
// stream reports a gap and reads the file from its start.
//
// With -debug the adapter serves in the foreground, for a debugger, and
// prints the CRANK_REATTACH_ADAPTERS line that makes a gateway attach to
// it (sdk.WithManagedDebug).
package main

import (
	"flag"
	"log"

	"github.com/crankmcp/crank/plugins/sdk"
)

func main() {
	debug := flag.Bool("debug", false, "serve in the foreground for a debugger and print the "+sdk.ReattachEnv+" line for the gateway")
	flag.Parse()
	var opts []sdk.ServeOption
	if *debug {
		opts = append(opts, sdk.WithManagedDebug())
	}
	if err := sdk.Serve(newAdapter(), opts...); err != nil {
		log.Fatal(err)
	}
}
