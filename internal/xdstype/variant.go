package xdstype

// Variant is an xDS protocol variant, as the relay's clients, its
// transports toward origins and the load generator all spell it (and as
// the metrics' variant label reads).
type Variant string

const (
	// SotW is the state-of-the-world protocol (StreamAggregatedResources
	// and the per-type Stream* services).
	SotW Variant = "sotw"
	// Delta is the incremental protocol (DeltaAggregatedResources and the
	// per-type Delta* services).
	Delta Variant = "delta"
)

// Transport values of authorities[].transport: how the relay speaks to an
// authority's origins. The ADS ones are the variants' own names.
const (
	TransportDelta = string(Delta)
	TransportSotW  = string(SotW)
	// The per-type transports: one stream per type (and group) on the
	// per-type services (CDS, EDS, LDS, RDS, SDS, ...), for origins
	// without ADS.
	TransportDeltaPerType = "delta-per-type"
	TransportSotWPerType  = "sotw-per-type"
)
