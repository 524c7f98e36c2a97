package downstream

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	// The proto codec Codec delegates to.
	_ "google.golang.org/grpc/encoding/proto"
)

// encodedResponse is a response whose bytes are already encoded: own, this
// client's envelope fields (type_url, nonce, SotW version_info, removals,
// resource errors), and shared, encodings other clients receive too (an
// origin change's resources encoded once per change, or each resource's
// entry encoded once per revision: cache.Resource.Encoding). All are
// encodings of fields of the same response message; protobuf merges
// concatenated encodings, so own followed by shared is the whole
// response. None is ever written to.
type encodedResponse struct {
	own []byte
	// shared are kept as the buffers gRPC writes (mem.SliceBuffer, whose
	// Free does nothing), made once with the bytes: a response boxes none.
	shared []mem.Buffer

	// Room for the common response (one change of a resource or two to
	// one client), so that building and sending it allocates this struct
	// and little else: own's bytes, shared's first entries, and the
	// BufferSlice Codec hands gRPC.
	ownRoom    [128]byte
	sharedRoom [2]mem.Buffer
	sliceRoom  [3]mem.Buffer
}

// newEncodedResponse returns an empty response with room for n shared
// entries.
func newEncodedResponse(n int) *encodedResponse {
	r := new(encodedResponse)
	r.own = r.ownRoom[:0]
	if n <= len(r.sharedRoom) {
		r.shared = r.sharedRoom[:0]
	} else {
		r.shared = make([]mem.Buffer, 0, n)
	}
	return r
}

// bytes returns the whole response as one slice (a copy).
func (r *encodedResponse) bytes() []byte {
	n := len(r.own)
	for _, b := range r.shared {
		n += b.Len()
	}
	out := make([]byte, 0, n)
	out = append(out, r.own...)
	for _, b := range r.shared {
		out = append(out, b.ReadOnlyData()...)
	}
	return out
}

// Codec returns the codec the grpc.Server carrying a Server must use
// (grpc.ForceServerCodecV2(downstream.Codec())) when Options.SharedEncoding
// is set: the proto codec for every message, and an encodedResponse sent
// as the bytes it has, without a copy or a re-encoding.
func Codec() encoding.CodecV2 {
	return codec{proto: protoCodec}
}

const protoCodecName = "proto"

// protoCodec is gRPC's proto codec, which Codec delegates to.
var protoCodec = encoding.GetCodecV2(protoCodecName)

type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*encodedResponse); ok {
		bs := mem.BufferSlice(r.sliceRoom[:0])
		bs = append(bs, mem.SliceBuffer(r.own))
		bs = append(bs, r.shared...)
		return bs, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal decodes a request; into a laterRequest, it keeps its bytes.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*laterRequest); ok {
		data.Ref() // gRPC frees its own reference once this returns
		r.data = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// laterRequest is what a stream's handler waits in Recv with (serve): the
// request's bytes, which decode decodes once Recv returned them. Waiting
// with the request message itself, as a generated Recv does, would keep
// an empty message (about 200 bytes) per idle stream.
type laterRequest struct{ data mem.BufferSlice }

// decode decodes the request r has into m, and lets go of its bytes;
// the error is the status gRPC's own Recv would end the stream with.
func (r *laterRequest) decode(m any) error {
	data := r.data
	r.data = nil
	defer data.Free()
	if err := protoCodec.Unmarshal(data, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// Name is the proto codec's: the content subtype on the wire is unchanged.
func (codec) Name() string { return protoCodecName }
