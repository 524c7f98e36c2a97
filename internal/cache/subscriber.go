package cache

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
)

// subOp is one Subscriber call decided under Cache.mu.
type subOp struct {
	subscribe bool
	link      LinkID
	typeURL   string
	node      *corev3.Node
	names     []string
}

// queueLocked appends a subscribe (or unsubscribe) of k to the outbox,
// merging it into the previous call when that one is for the same link,
// type and direction.
func (c *Cache) queueLocked(subscribe bool, k Key, node *corev3.Node) {
	if n := len(c.outbox); n > 0 {
		last := &c.outbox[n-1]
		if last.subscribe == subscribe && last.link == k.Link && last.typeURL == k.TypeURL {
			last.names = append(last.names, k.Name)
			if last.node == nil {
				last.node = node
			}
			return
		}
	}
	c.outbox = append(c.outbox, subOp{subscribe: subscribe, link: k.Link, typeURL: k.TypeURL, node: node, names: []string{k.Name}})
}

// flush makes the queued Subscriber calls with mu unlocked, in the order
// they were decided: whichever goroutine finds the outbox idle drains it
// (including what others queue meanwhile); the others return at once, since
// Subscriber calls are asynchronous requests anyway.
func (c *Cache) flush() {
	c.mu.Lock()
	if c.flushing || len(c.outbox) == 0 {
		c.mu.Unlock()
		return
	}
	c.flushing = true
	for len(c.outbox) > 0 {
		ops, up := c.outbox, c.upstream
		c.outbox = nil
		c.mu.Unlock()
		for _, op := range ops {
			switch {
			case up == nil:
				c.lg.Warn("no upstream set: subscription change dropped", zap.String("type_url", op.typeURL), zap.Int("names", len(op.names)))
			case op.subscribe:
				up.Subscribe(op.link, op.node, op.typeURL, op.names)
			default:
				up.Unsubscribe(op.link, op.typeURL, op.names)
			}
		}
		c.mu.Lock()
	}
	c.flushing = false
	c.mu.Unlock()
}
