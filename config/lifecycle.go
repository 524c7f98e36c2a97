package config

// lifecycle checks downstream's connection age and drain settings.
func (v *validator) lifecycle() {
	d := v.c.Downstream
	v.nonNegative("downstream.max_connection_age", d.MaxConnectionAge)
	if d.MaxConnectionAge > 0 {
		// gRPC reads 0 as "no grace": the connection would stay until its
		// streams end, which xDS streams never do.
		v.positive("downstream.max_connection_age_grace", d.MaxConnectionAgeGrace)
	} else {
		v.nonNegative("downstream.max_connection_age_grace", d.MaxConnectionAgeGrace)
	}
	v.nonNegative("downstream.drain_delay", d.DrainDelay)
	v.nonNegative("downstream.drain_duration", d.DrainDuration)
	if d.DrainWaves < 1 || d.DrainWaves > maxDrainWaves {
		v.add("downstream.drain_waves", "must be between 1 and %d, got %d", maxDrainWaves, d.DrainWaves)
	}
}

// maxDrainWaves bounds downstream.drain_waves (each wave is a timer tick).
const maxDrainWaves = 1000
