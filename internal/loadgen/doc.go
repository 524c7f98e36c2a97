// Package loadgen simulates a fleet of raw ADS clients against any xDS
// server, to load-test it and to measure how fast it fans updates out.
//
// A Fleet spreads N clients over C gRPC connections (many streams per
// connection, so ten thousand clients do not need ten thousand sockets).
// Each client opens one ADS stream (SotW or delta), subscribes to a list of
// names, its own window of them (Config.Window: overlapping windows, as
// Envoys of different services want different clusters) or one glob, ACKs
// every response (NACKs a configurable fraction) and records when each
// resource version arrived and what it received (ClientCounts; an update's
// UpdateTally tells the clients it affected from the others).
//
// Fan-out latency. When a resource body carries a push stamp (see Stamp; the
// benchmark origin under bench/origin embeds one in every pushed resource),
// each receipt of a new stamp by a synced client is one sample: receipt time
// minus the origin's push time, on the same machine clock. Without stamps
// the latency of a version is the spread between its first and its last
// receipt across the fleet (first-to-last), one sample per version. Only
// updates count: what a client receives while it (re)syncs is not a sample.
package loadgen
