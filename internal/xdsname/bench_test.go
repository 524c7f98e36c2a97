package xdsname

import "testing"

// Sinks keep results alive so the compiler cannot drop the work (typed, so
// storing does not allocate).
var (
	sinkString string
	sinkName   Name
)

func BenchmarkCanonical(b *testing.B) {
	names := []struct{ name, in string }{
		{"canonical", "xdstp://control.example.com/envoy.config.endpoint.v3.ClusterLoadAssignment/mesh/backend-7?region=us-east1&shard=12&xds.node.zone=b"},
		{"reordered", "xdstp://control.example.com/envoy.config.endpoint.v3.ClusterLoadAssignment/mesh/backend-7?xds.node.zone=b&shard=12&region=us-east1"},
		{"legacy", "outbound|8080||backend-7.mesh.svc.cluster.local"},
	}
	for _, bc := range names {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := Canonical(bc.in)
				if err != nil {
					b.Fatal(err)
				}
				sinkString = s
			}
		})
	}
}

func BenchmarkGlobMatch(b *testing.B) {
	g := mustParse(b, "xdstp://control.example.com/envoy.config.listener.v3.Listener/ingress/*?node_type=ingress&region=us-east1&shard=12")
	member := mustParse(b, "xdstp://control.example.com/envoy.config.listener.v3.Listener/ingress/l-443?shard=12&region=us-east1&node_type=ingress")
	other := mustParse(b, "xdstp://control.example.com/envoy.config.listener.v3.Listener/ingress/l-443?node_type=egress&region=us-east1&shard=12")
	b.Run("member", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !g.Matches(member) {
				b.Fatal("want match")
			}
		}
	})
	b.Run("non-member", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if g.Matches(other) {
				b.Fatal("want no match")
			}
		}
	})
	b.Run("globof", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkName = member.GlobOf()
		}
	})
}
