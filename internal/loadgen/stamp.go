package loadgen

import (
	"bytes"
	"strconv"
	"time"
)

// StampMarker prefixes a push stamp inside a resource body. An origin that
// wants its fan-out latency measured puts Stamp(pushTime) in any string
// field of the resource (the benchmark origin uses endpoint metadata); the
// load generator finds it by scanning the serialized bytes, so it works for
// every resource type without decoding it.
const StampMarker = "xds-relay-push-unix-nano="

// Stamp returns the text an origin embeds in a resource pushed at t.
func Stamp(t time.Time) string {
	return StampMarker + strconv.FormatInt(t.UnixNano(), 10) + ";"
}

// ParseStamp finds a push stamp in a serialized resource.
func ParseStamp(body []byte) (time.Time, bool) {
	i := bytes.Index(body, []byte(StampMarker))
	if i < 0 {
		return time.Time{}, false
	}
	rest := body[i+len(StampMarker):]
	end := bytes.IndexByte(rest, ';')
	if end <= 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
