package csds

import (
	"errors"
	"io"
	"sync"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A StreamClientStatus stream answers its newest request. Its requests
// are read as they come (the pump) into one slot (latest): a request
// arriving while the handler builds or sends an answer replaces the one
// waiting, counted in xds_relay_csds_requests_replaced_total. A report is
// built only once the previous answer's Send returned, from the newest
// request. So a caller that sends without reading costs, per stream, one
// request and at most one report waiting in Send besides the one gRPC
// took (its transport keeps a message until the caller reads it): never a
// queue, whatever the number of requests sent.

// StreamClientStatus answers the newest request of the stream each time
// the previous answer was sent, until the caller ends the stream (its
// last request answered first) or the relay shuts down (Unavailable). A
// caller past its stream bound gets ResourceExhausted (callers.go).
func (s *Server) StreamClientStatus(stream statusv3.ClientStatusDiscoveryService_StreamClientStatusServer) error {
	ctx := stream.Context()
	caller, err := s.admit(ctx)
	if err != nil {
		return err
	}
	leave, err := s.callers.acquire(caller)
	if err != nil {
		s.m.streamsRefused.Inc()
		s.lg.Debug("client status stream refused: too many from one caller")
		return err
	}
	defer leave()
	l := &latest{wake: make(chan struct{}, 1)}
	s.wg.Add(1)
	go func() { // the pump: ends when Recv fails, at the latest once this handler returned
		defer s.wg.Done()
		for {
			req, err := stream.Recv()
			if l.put(req, err) {
				s.m.replaced.Inc()
			}
			if err != nil {
				return
			}
		}
	}()
	a := &streamAnswers{s: s, stream: stream}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closing:
			return status.Error(codes.Unavailable, ErrClosed.Error())
		case <-l.wake:
			if done, err := a.drain(l); done {
				return err
			}
		}
	}
}

// streamAnswers answers one stream's requests; owned by its handler.
type streamAnswers struct {
	s      *Server
	stream statusv3.ClientStatusDiscoveryService_StreamClientStatusServer
	sent   bool // an answer was sent (the truncation note goes in the header once)
}

// drain answers what l has, the newest request each time, until it is
// empty; done when the stream ends (err: how; nil once the caller ended
// it).
func (a *streamAnswers) drain(l *latest) (done bool, err error) {
	for {
		req, err := l.take()
		switch {
		case req != nil:
		case errors.Is(err, io.EOF):
			return true, nil
		case err != nil:
			return true, err
		default:
			return false, nil
		}
		if err := a.answer(req); err != nil {
			return true, err
		}
	}
}

// answer builds the answer to req and sends it.
func (a *streamAnswers) answer(req *statusv3.ClientStatusRequest) error {
	ctx := a.stream.Context()
	a.s.m.requests.WithLabelValues(methodStream).Inc()
	resp, note, err := a.s.answer(ctx, req)
	if err != nil {
		return err
	}
	if note != "" {
		md := metadata.Pairs(TruncatedHeader, note)
		if !a.sent {
			_ = a.stream.SetHeader(md)
		}
		a.stream.SetTrailer(md)
	}
	if err := a.stream.Send(resp); err != nil {
		return err
	}
	a.sent = true
	return nil
}

// latest is a stream's newest unanswered request, and Recv's error once
// it failed; written by the pump, taken by the handler.
type latest struct {
	mu   sync.Mutex
	req  *statusv3.ClientStatusRequest // guarded by mu; nil: none waiting
	err  error                         // guarded by mu; Recv's error (io.EOF: the caller ended the stream)
	wake chan struct{}                 // 1 slot: poked after each put
}

// put records what Recv returned: a request replaces the one waiting
// (replaced says so), an error is kept for after it.
func (l *latest) put(req *statusv3.ClientStatusRequest, err error) (replaced bool) {
	l.mu.Lock()
	if err != nil {
		l.err = err
	} else {
		replaced = l.req != nil
		l.req = req
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return replaced
}

// take returns the waiting request, else Recv's error (nil, nil: nothing
// yet).
func (l *latest) take() (*statusv3.ClientStatusRequest, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if req := l.req; req != nil {
		l.req = nil
		return req, nil
	}
	return nil, l.err
}
