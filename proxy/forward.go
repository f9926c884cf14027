package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// upstreamRequest is what the proxy sends to a provider.
type upstreamRequest struct {
	method string
	path   string // escaped path below the API root, e.g. "/chat/completions"
	query  string
	header http.Header
	// body is a buffered body, replayable for fallbacks; when stream is
	// set instead, the body is forwarded unbuffered and there is no fallback.
	body   []byte
	lease  *body.Lease // when body is pooled: held by each reader of it
	stream io.Reader
	length int64 // of stream; -1 unknown
}

// hopHeaders are connection-level headers a proxy must not forward
// (RFC 9110 7.6.1), plus the ones the proxy recomputes.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// outgoingHeader copies the client's headers minus hop-by-hop ones, the
// connection tokens, and the X-Scar-* headers only the proxy may set.
func (s *Server) outgoingHeader(in http.Header) http.Header {
	h := in.Clone()
	for _, f := range h.Values("Connection") {
		for _, tok := range strings.Split(f, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				h.Del(tok)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if len(k) > 7 && strings.EqualFold(k[:7], "X-Scar-") {
			delete(h, k)
		}
	}
	h.Del("Host")
	h.Del("Content-Length")
	if s.tenants.Keys() {
		// The client's key is the gateway key, and its other credentials
		// are for the gateway too: none may reach a provider.
		for _, k := range [...]string{"Authorization", "Api-Key", "X-Api-Key", "Cookie", "Proxy-Authorization"} {
			h.Del(k)
		}
	}
	return h
}

// attempt is one provider's answer with the context that bounds its body.
type attempt struct {
	provider *providers.Provider
	res      *http.Response
	ctx      context.Context
	cancel   context.CancelCauseFunc
}

// release ends the attempt: closes the body and cancels its context.
func (a *attempt) release() {
	if a.res != nil {
		a.res.Body.Close()
	}
	a.cancel(context.Canceled)
}

// providerFailure is reported for each provider that failed, whether or
// not a fallback took over.
type providerFailure struct {
	provider   string
	typ        string // store incident type
	statusCode int
	message    string
}

// retryable reports whether a status lets the next provider in the chain try.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// send tries the chain in order. It returns the attempt whose answer goes
// to the client, or the failure of the last provider. Every provider that
// failed is passed to onFail (the client leaving is not a failure).
func (s *Server) send(ctx context.Context, chain []*providers.Provider, ur *upstreamRequest, onFail func(providerFailure)) (*attempt, *failure) {
	var last failure
	for i, p := range chain {
		final := i == len(chain)-1 || ur.stream != nil
		if i > 0 {
			s.metrics.fallbacks.WithLabelValues(chain[i-1].Name(), p.Name()).Inc()
		}
		try := ur
		if !final {
			// The provider sets its own headers on the request: keep ur's
			// for the next attempt.
			c := *ur
			c.header = ur.header.Clone()
			try = &c
		}
		a, f := s.try(ctx, p, try)
		if f != nil {
			if f.incident == "" { // the client left
				return nil, f
			}
			onFail(providerFailure{provider: p.Name(), typ: f.incident, statusCode: f.status, message: f.message})
			last = *f
			if final {
				return nil, &last
			}
			continue
		}
		if final || !retryable(a.res.StatusCode) {
			return a, nil
		}
		// A retryable answer with a fallback left: record it, try the next.
		msg := wire.ErrorMessage(readCapped(a.res.Body, 64<<10), a.res.StatusCode)
		onFail(providerFailure{provider: p.Name(), typ: "http_error", statusCode: a.res.StatusCode, message: msg})
		a.release()
	}
	return nil, &last
}

// try sends ur to one provider, bounding the wait for response headers.
// ur.header becomes the request's header, which the provider adds to.
func (s *Server) try(ctx context.Context, p *providers.Provider, ur *upstreamRequest) (*attempt, *failure) {
	actx, cancel := context.WithCancelCause(ctx)
	var sent io.Reader
	length := int64(len(ur.body))
	held := &heldBody{}
	held.b.Store(&ur.body)
	defer held.release() // once the provider answered, nothing replays the body
	if ur.stream != nil {
		sent, length = ur.stream, ur.length
	} else if len(ur.body) > 0 {
		sent = body.NewDrainReader(ur.body, ur.lease)
	}
	req, err := http.NewRequestWithContext(actx, ur.method, "http://provider", sent)
	if err != nil {
		cancel(err)
		return nil, &failure{http.StatusBadGateway, "upstream_unreachable", "cannot build provider request"}
	}
	req.URL.Path = ""
	req.URL.RawPath = ""
	if err := setPath(req, ur.path); err != nil {
		// Paths are checked before sending; this is the proxy's own bug.
		cancel(err)
		return nil, &failure{http.StatusBadGateway, "upstream_unreachable", "cannot build provider request"}
	}
	req.URL.RawQuery = ur.query
	req.Header = ur.header // the provider adds to it: see send
	req.ContentLength = length
	if ur.stream == nil {
		// The response keeps req, and so GetBody, for as long as the
		// answer streams: it must not keep ur (and its body) alive.
		lease := ur.lease
		req.GetBody = func() (io.ReadCloser, error) {
			if b := held.bytes(); b != nil {
				return body.NewDrainReader(b, lease), nil
			}
			return http.NoBody, nil
		}
		if len(ur.body) == 0 {
			req.Body = http.NoBody
		}
	}
	timer := time.AfterFunc(p.Config().ResponseHeaderTimeout, func() { cancel(errHeaderTimeout) })
	res, err := p.RoundTrip(req)
	timer.Stop()
	if err != nil {
		f := classify(ctx, actx, err)
		cancel(err)
		return nil, &f
	}
	res.Body = newIdleReader(res.Body, p.Config().IdleTimeout, func() { cancel(errIdleTimeout) })
	return &attempt{provider: p, res: res, ctx: actx, cancel: cancel}, nil
}

// heldBody is the body GetBody replays, until release.
type heldBody struct{ b atomic.Pointer[[]byte] }

func (h *heldBody) bytes() []byte {
	if p := h.b.Load(); p != nil {
		return *p
	}
	return nil
}

func (h *heldBody) release() { h.b.Store(nil) }

// setPath sets an escaped path on req.URL as it is: never resolved as a
// reference, so "//x" stays a path and ".." is not folded.
func setPath(req *http.Request, escaped string) error {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return err
	}
	req.URL.Path, req.URL.RawPath = p, escaped
	return nil
}

// idleReader cancels its request when one Read waits longer than idle. The
// time between reads (the client consuming) is not counted.
type idleReader struct {
	rc    io.ReadCloser
	idle  time.Duration
	timer *time.Timer // stopped except while a Read waits
}

func newIdleReader(rc io.ReadCloser, idle time.Duration, fire func()) *idleReader {
	t := time.AfterFunc(idle, fire)
	t.Stop()
	return &idleReader{rc: rc, idle: idle, timer: t}
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.timer.Reset(r.idle)
	n, err := r.rc.Read(p)
	r.timer.Stop()
	return n, err
}

func (r *idleReader) Close() error {
	r.timer.Stop()
	return r.rc.Close()
}

// readCapped reads at most max bytes of r.
func readCapped(r io.Reader, max int64) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, max))
	return b
}

// responseHeaderSkip lists provider response headers the proxy drops.
var responseHeaderSkip = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// deliver copies the provider's answer to the client. A stream (SSE, or
// any body of unknown length) is flushed after each read, so events reach
// the client as they arrive; a body of known length is buffered by the
// server and goes out with the headers in as few writes as it takes, as
// httputil.ReverseProxy does. Each chunk is also given to observe (which
// must not keep it). It returns the read error that cut the body short
// (nil at a clean end) and whether the client went away.
func deliver(c echo.Context, a *attempt, observe func([]byte)) (readErr error, clientGone bool) {
	w := c.Response()
	h := w.Header()
	for k, vs := range a.res.Header {
		if responseHeaderSkip[k] {
			continue
		}
		h[k] = vs
	}
	// The headers go out with the first bytes of the body, in one write,
	// as with httputil.ReverseProxy.
	w.WriteHeader(a.res.StatusCode)
	sse := wire.IsSSE(a.res.Header)
	flush := sse || a.res.ContentLength < 0
	bufs := &copyBufs
	if sse {
		bufs = &streamBufs
	}
	bufp := bufs.Get().(*[]byte)
	defer bufs.Put(bufp)
	buf := *bufp
	for {
		n, err := a.res.Body.Read(buf)
		if n > 0 {
			if observe != nil {
				observe(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, true
			}
			if flush {
				w.Flush()
			}
		}
		if err == io.EOF {
			// Send the rest now, not when the handler returns: what the
			// handler does next (auto-capture, metrics) must not delay
			// the client.
			w.Flush()
			return nil, false
		}
		if err != nil {
			if c.Request().Context().Err() != nil {
				return nil, true
			}
			return err, false
		}
	}
}

// Copy buffers of deliver. A stream holds its buffer for as long as it is
// open, and its events arrive a few hundred bytes at a time: a 4 KiB buffer
// (the transport's own read buffer size) keeps a thousand open streams
// 28 MB smaller than 32 KiB buffers would; a larger event takes more reads.
var (
	copyBufs   = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	streamBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}
)
