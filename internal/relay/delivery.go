package relay

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// buildDelivery builds safe delivery (internal/delivery), which the cache
// is built with (its Validator and RemovalGuard).
func (r *Relay) buildDelivery(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer) *delivery.Delivery {
	return delivery.New(delivery.Options{Config: cfg, Logger: lg, Registry: reg, ReleasePath: admin.DeliveryReleasePath})
}

// addDelivery plugs d, on cache c, clients ds and origins up, into the
// relay's seams: its release loop, its reload (its page and release
// endpoint are internal/admin's). After the other components' reload
// hooks: it reads the authorities they applied.
func (r *Relay) addDelivery(d *delivery.Delivery, c *cache.Cache, ds *downstream.Server, up *upstream.Manager) {
	d.SetCache(c)
	d.SetFleet(ds)
	d.SetOrigins(up)
	r.goRun(d.Run)
	r.onReload(func(_, next *config.Config) error {
		d.SetConfig(next)
		return nil
	}, "delivery", "authorities")
}
