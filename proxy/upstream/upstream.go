// Package upstream sends requests to providers and brings their answers
// back: a chain of providers tried in order (falling back on 429, 5xx,
// timeouts and unreachable providers before any byte reached the client),
// the headers a provider may see, the timeouts of an answer (headers, then
// idle time between chunks of a stream), the one policy that turns a
// transport error into a status (502 unreachable, 504 timeout, 499 the
// client left: no incident), and the copy of an answer to the client,
// flushed as a stream goes.
//
// # Imports
//
// It imports providers, proxy/body, proxy/wire and store's types; never
// Echo, never the memory.
package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// Request is what the proxy sends to a provider.
type Request struct {
	Method string
	Path   string // escaped path below the API root, e.g. "/chat/completions"
	Query  string
	Header http.Header
	// Body is a buffered body, replayable for fallbacks; when Stream is
	// set instead, the body is forwarded unbuffered and there is no fallback.
	Body   []byte
	Lease  *body.Lease // when Body is pooled: held by each reader of it
	Stream io.Reader
	Length int64 // of Stream; -1 unknown
}

// credentialHeaders carry a client's credentials.
var credentialHeaders = []string{"Authorization", "Api-Key", "X-Api-Key", "X-Goog-Api-Key", "Cookie", "Proxy-Authorization"}

// hopHeaders are connection-level headers a proxy must not forward
// (RFC 9110 7.6.1), plus the ones the proxy recomputes.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// OutgoingHeader copies the client's headers minus hop-by-hop ones, the
// connection tokens, and the X-Scar-* headers only the proxy may set. On
// a gateway (gateway keys configured) it also drops every credential.
func OutgoingHeader(in http.Header, gateway bool) http.Header {
	h := in.Clone()
	for _, f := range h.Values("Connection") {
		for _, tok := range strings.Split(f, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				h.Del(tok)
			}
		}
	}
	// The names below are canonical (TestHeaderNamesCanonical): deleted
	// as they are, not canonicalized again on every request.
	for _, k := range hopHeaders {
		delete(h, k)
	}
	for k := range h {
		if len(k) > 7 && strings.EqualFold(k[:7], "X-Scar-") {
			delete(h, k)
		}
	}
	delete(h, "Host")
	delete(h, "Content-Length")
	if gateway {
		// The client's key is the gateway key, and its other credentials
		// are for the gateway too: none may reach a provider.
		for _, k := range credentialHeaders {
			delete(h, k)
		}
	}
	return h
}

// OutgoingQuery returns the client's escaped query as a provider may see
// it: as it came, but on a gateway (gateway keys configured) without the
// "key" parameters, where a Gemini client may put its key (the gateway
// key). A query without one keeps its bytes.
func OutgoingQuery(raw string, gateway bool) string {
	if !gateway {
		return raw
	}
	return providers.DropQueryKey(raw)
}

// Attempt is one provider's answer with the context that bounds its body.
type Attempt struct {
	Provider *providers.Provider
	Res      *http.Response
	Ctx      context.Context // bounds Res's body: its cause says why it ended
	cancel   context.CancelCauseFunc
}

// Release ends the attempt: closes the body and cancels its context.
func (a *Attempt) Release() {
	if a.Res != nil {
		a.Res.Body.Close()
	}
	a.cancel(context.Canceled)
}

// ProviderFailure is reported for each provider that failed, whether or
// not a fallback took over.
type ProviderFailure struct {
	Provider   string
	Type       string // store incident type
	StatusCode int
	Message    string
}

// Retryable reports whether a status lets the next provider in the chain try.
func Retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// Hooks are told what happens to a request along its chain; a nil hook
// is not called.
type Hooks struct {
	// Failed is called for each provider that failed, whether or not a
	// fallback took over (the client leaving is not a failure).
	Failed func(ProviderFailure)
	// Fallback is called when the request moves on from one provider to
	// the next.
	Fallback func(from, to string)
}

// Send tries the chain in order. It returns the attempt whose answer goes
// to the client, or the failure of the last provider.
func Send(ctx context.Context, chain []*providers.Provider, ur *Request, hooks Hooks) (*Attempt, *Failure) {
	onFail := func(pf ProviderFailure) {
		if hooks.Failed != nil {
			hooks.Failed(pf)
		}
	}
	var last Failure
	for i, p := range chain {
		final := i == len(chain)-1 || ur.Stream != nil
		if i > 0 && hooks.Fallback != nil {
			hooks.Fallback(chain[i-1].Name(), p.Name())
		}
		try := ur
		if !final {
			// The provider sets its own headers on the request: keep ur's
			// for the next attempt.
			c := *ur
			c.Header = ur.Header.Clone()
			try = &c
		}
		a, f := Try(ctx, p, try)
		if f != nil {
			if f.Incident == "" { // the client left
				return nil, f
			}
			onFail(ProviderFailure{Provider: p.Name(), Type: f.Incident, StatusCode: f.Status, Message: f.Message})
			last = *f
			if final {
				return nil, &last
			}
			continue
		}
		if final || !Retryable(a.Res.StatusCode) {
			return a, nil
		}
		// A retryable answer with a fallback left: record it, try the next.
		msg := wire.ErrorMessage(ReadCapped(a.Res.Body, 64<<10), a.Res.StatusCode)
		onFail(ProviderFailure{Provider: p.Name(), Type: store.TypeHTTPError, StatusCode: a.Res.StatusCode, Message: msg})
		a.Release()
	}
	return nil, &last
}

// Try sends ur to one provider, bounding the wait for response headers.
// ur.Header becomes the request's header, which the provider adds to.
func Try(ctx context.Context, p *providers.Provider, ur *Request) (*Attempt, *Failure) {
	actx, cancel := context.WithCancelCause(ctx)
	var sent io.Reader
	length := int64(len(ur.Body))
	held := &heldBody{}
	held.b.Store(&ur.Body)
	defer held.release() // once the provider answered, nothing replays the body
	if ur.Stream != nil {
		sent, length = ur.Stream, ur.Length
	} else if len(ur.Body) > 0 {
		sent = body.NewDrainReader(ur.Body, ur.Lease)
	}
	req, err := http.NewRequestWithContext(actx, ur.Method, "http://provider", sent)
	if err != nil {
		cancel(err)
		return nil, &Failure{http.StatusBadGateway, store.TypeUnreachable, "cannot build provider request"}
	}
	req.URL.Path = ""
	req.URL.RawPath = ""
	if err := setPath(req, ur.Path); err != nil {
		// Paths are checked before sending; this is the proxy's own bug.
		cancel(err)
		return nil, &Failure{http.StatusBadGateway, store.TypeUnreachable, "cannot build provider request"}
	}
	req.URL.RawQuery = ur.Query
	req.Header = ur.Header // the provider adds to it: see send
	req.ContentLength = length
	if ur.Stream == nil {
		// The response keeps req, and so GetBody, for as long as the
		// answer streams: it must not keep ur (and its body) alive.
		lease := ur.Lease
		req.GetBody = func() (io.ReadCloser, error) {
			if b := held.bytes(); b != nil {
				return body.NewDrainReader(b, lease), nil
			}
			return http.NoBody, nil
		}
		if len(ur.Body) == 0 {
			req.Body = http.NoBody
		}
	}
	timer := time.AfterFunc(p.Config().ResponseHeaderTimeout, func() { cancel(errHeaderTimeout) })
	res, err := p.RoundTrip(req)
	timer.Stop()
	if err != nil {
		f := Classify(ctx, actx, err)
		cancel(err)
		return nil, &f
	}
	res.Body = newIdleReader(res.Body, p.Config().IdleTimeout, func() { cancel(errIdleTimeout) })
	return &Attempt{Provider: p, Res: res, Ctx: actx, cancel: cancel}, nil
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

// ReadCapped reads at most max bytes of r.
func ReadCapped(r io.Reader, max int64) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, max))
	return b
}

// ReadAnswer reads at most max bytes of an answer's body: when its length
// is known and within max, into a buffer of that length (an error answer
// is read on every failure of a storm).
func ReadAnswer(res *http.Response, max int64) []byte {
	if n := res.ContentLength; n >= 0 && n <= max {
		// One more than it says, within max: a body longer than it said
		// is read on.
		b := make([]byte, min(n+1, max))
		k, _ := io.ReadFull(res.Body, b)
		if k < len(b) || int64(k) == max {
			return b[:k]
		}
		return append(b[:k], ReadCapped(res.Body, max-int64(k))...)
	}
	return ReadCapped(res.Body, max)
}

// ResponseWriter is the client's side of an answer: it must flush.
type ResponseWriter interface {
	http.ResponseWriter
	http.Flusher
}

// responseHeaderSkip lists provider response headers the proxy drops:
// hop-by-hop headers, and X-Request-Id, which names the request as the
// proxy knows it (the proxy sets its own).
var responseHeaderSkip = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "X-Request-Id": true,
}

// Deliver copies the provider's answer to the client. A stream (SSE, or
// any body of unknown length) is flushed after each read, so events reach
// the client as they arrive; a body of known length is buffered by the
// server and goes out with the headers in as few writes as it takes, as
// httputil.ReverseProxy does. Each chunk is also given to observe (which
// must not keep it). It returns the read error that cut the body short
// (nil at a clean end) and whether the client went away.
func Deliver(w ResponseWriter, clientCtx context.Context, a *Attempt, observe func([]byte)) (readErr error, clientGone bool) {
	h := w.Header()
	for k, vs := range a.Res.Header {
		if responseHeaderSkip[k] {
			continue
		}
		h[k] = vs
	}
	// The headers go out with the first bytes of the body, in one write,
	// as with httputil.ReverseProxy.
	w.WriteHeader(a.Res.StatusCode)
	sse := wire.IsSSE(a.Res.Header)
	flush := sse || a.Res.ContentLength < 0
	bufs := &copyBufs
	if sse {
		bufs = &streamBufs
	}
	bufp := bufs.Get().(*[]byte)
	defer bufs.Put(bufp)
	buf := *bufp
	for {
		n, err := a.Res.Body.Read(buf)
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
			if clientCtx.Err() != nil {
				return nil, true
			}
			return err, false
		}
	}
}

// Copy buffers of Deliver. A stream holds its buffer for as long as it is
// open, and its events arrive a few hundred bytes at a time: a buffer the
// size of the transport's own read buffer keeps open streams small, at
// the cost of more reads for a larger event.
var (
	copyBufs   = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	streamBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}
)

// StatusClientClosed is logged (never sent: nobody is listening) when the
// client goes away before the answer is complete. It is not an incident.
const StatusClientClosed = 499

// Causes set on a request context when the proxy itself gives up on the
// provider; Classify tells them apart from a client that left.
var (
	errHeaderTimeout = errors.New("provider did not send response headers in time")
	errIdleTimeout   = errors.New("provider stream was idle for too long")
)

// Failure is how one attempt to reach a provider ended, decided by Classify.
type Failure struct {
	Status   int    // status answered to the client: 502, 504 or StatusClientClosed
	Incident string // store incident type, "" when it is not an incident
	Message  string // safe to show the client and to store
}

// Classify is the proxy's single error-to-status policy for transport
// errors: a client that left is 499 and no incident; a timeout (before
// headers or between stream chunks) is 504; anything else means the
// provider was unreachable, 502.
func Classify(clientCtx, attemptCtx context.Context, err error) Failure {
	switch cause := context.Cause(attemptCtx); {
	case errors.Is(cause, errHeaderTimeout):
		return Failure{http.StatusGatewayTimeout, store.TypeTimeout, "provider timed out: " + errHeaderTimeout.Error()}
	case errors.Is(cause, errIdleTimeout):
		return Failure{http.StatusGatewayTimeout, store.TypeTimeout, "provider timed out: " + errIdleTimeout.Error()}
	}
	if clientCtx.Err() != nil {
		return Failure{StatusClientClosed, "", "client closed the request"}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return Failure{http.StatusGatewayTimeout, store.TypeTimeout, "provider timed out"}
	}
	return Failure{http.StatusBadGateway, store.TypeUnreachable, "provider unreachable: " + TransportMessage(err)}
}

// TransportMessage names the kind of transport failure without leaking
// internal addresses beyond what the operator configured.
func TransportMessage(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return "connection failed (" + op.Err.Error() + ")"
	case errors.Is(err, net.ErrClosed):
		return "connection closed"
	default:
		var dns *net.DNSError
		if errors.As(err, &dns) {
			return "host not found"
		}
		return "connection error"
	}
}

func (f Failure) APIError() *wire.Error {
	switch f.Status {
	case http.StatusGatewayTimeout:
		return &wire.Error{Status: f.Status, Message: f.Message, Type: "timeout", Code: "provider_timeout"}
	default:
		return &wire.Error{Status: f.Status, Message: f.Message, Type: "api_error", Code: "provider_unreachable"}
	}
}
