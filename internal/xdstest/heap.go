package xdstest

import "runtime"

// LiveHeap is the live heap after full collections: what a test measures
// memory kept with (before and after, never against a fixed figure alone).
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
