package sdk

import (
	"fmt"
	"os"
	"time"
)

// parentCheckInterval is how often an adapter checks that the host that
// started it is still alive.
const parentCheckInterval = time.Second

// watchParent calls gone once the process that started this one is gone,
// which it sees as a change of the parent process ID (an orphan is
// re-parented to init or a subreaper). A host killed with SIGKILL cannot
// stop its adapters, so without this they would run on forever. It returns
// a function that stops the watch.
func watchParent(getppid func() int, interval time.Duration, gone func(was, now int)) (stop func()) {
	parent := getppid()
	done := make(chan struct{})
	if parent <= 1 {
		return func() {} // started by init itself: nothing to watch
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if now := getppid(); now != parent {
					gone(parent, now)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// exitWhenOrphaned ends the adapter process when its host is gone.
func exitWhenOrphaned() func() {
	return watchParent(os.Getppid, parentCheckInterval, func(was, now int) {
		fmt.Fprintf(os.Stderr, "crank adapter: the host process (pid %d) is gone; exiting\n", was)
		os.Exit(1)
	})
}
