package caddymodule

import (
	"context"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// shutdownTimeout bounds how long stopping the process waits for Crank's
// session readers and job runners to record their end.
const shutdownTimeout = 3 * time.Second

// stopOnExit subscribes the process's stop to Caddy's "stopping" event,
// which Caddy emits before it stops any app. Caddy stops its apps in no
// fixed order, and the HTTP app waits for open requests (forever without a
// grace_period): a session reader's upstream request, or an MCP client's
// open stream, would hold it. So when the process exits, Crank ends its
// runners (recording sessions stopped and jobs failed, end "shutdown") and
// closes its MCP sessions on this replica first; a reload stops nothing.
// Subscribing only registers a handler with the config's events app.
func stopOnExit(ctx caddy.Context, logger *zap.Logger) error {
	app, err := ctx.App("events")
	if err != nil {
		return err
	}
	return app.(*caddyevents.App).On("stopping", exitHandler{logger})
}

type exitHandler struct{ logger *zap.Logger }

func (e exitHandler) Handle(context.Context, caddy.Event) error {
	if caddy.Exiting() {
		stopCrank(e.logger)
	}
	return nil
}

var stopCrankOnce sync.Once

// stopCrank ends every runner of the process, then the MCP sessions of its
// endpoints (their records stay in the store for other replicas).
func stopCrank(logger *zap.Logger) {
	stopCrankOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		start := time.Now()
		if err := host.StopRunners(ctx); err != nil {
			logger.Warn("sessions and jobs still running when the process stops; they end as orphans", zap.Error(err))
		}
		endpointPool.Range(func(_, v any) bool {
			_ = v.(pooledEndpoint).Close()
			return true
		})
		logger.Info("sessions and jobs of this replica ended", zap.Duration("took", time.Since(start)))
	})
}
