package downstream

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	// The proto codec Codec delegates to.
	_ "google.golang.org/grpc/encoding/proto"
)

// encodedResponse is a response whose bytes are already encoded: shared,
// the part every client that gets the same origin change receives (its
// resources, encoded once per change), and own, this client's envelope
// fields (type_url, nonce, SotW version_info). Both are encodings of the
// same response message; protobuf merges concatenated encodings, so
// own+shared is the whole response. Neither is ever written to.
type encodedResponse struct {
	own    []byte
	shared []byte
}

// Codec returns the codec the grpc.Server carrying a Server must use
// (grpc.ForceServerCodecV2(downstream.Codec())) when Options.SharedEncoding
// is set: the proto codec for every message, and an encodedResponse sent
// as the bytes it holds, without a copy or a re-encoding.
func Codec() encoding.CodecV2 {
	return codec{proto: encoding.GetCodecV2(protoCodecName)}
}

const protoCodecName = "proto"

type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*encodedResponse); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.own), mem.SliceBuffer(r.shared)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// Name is the proto codec's: the content subtype on the wire is unchanged.
func (codec) Name() string { return protoCodecName }
