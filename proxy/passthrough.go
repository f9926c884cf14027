package proxy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/upstream"
	"github.com/tidwall/gjson"
)

// models answers GET /v1/models with the merged lists of every provider.
func (s *Server) models(c echo.Context) error {
	if _, aerr := s.resolveTenant(c); aerr != nil {
		return s.writeError(c, aerr)
	}
	ctx := c.Request().Context()
	var data []json.RawMessage
	seen := map[string]bool{}
	var lastFail *upstream.Failure
	var lastStatus int
	var lastBody []byte
	for _, p := range s.providers().Providers() {
		hdr := upstream.OutgoingHeader(c.Request().Header, s.tenants.Keys())
		hdr.Del("Accept-Encoding")
		a, f := upstream.Try(ctx, p, &upstream.Request{Method: http.MethodGet, Path: "/models", Header: hdr})
		if f != nil {
			if f.Incident == "" {
				return nil
			}
			lastFail = f
			continue
		}
		body := upstream.ReadCapped(a.Res.Body, 16<<20)
		a.Release()
		if a.Res.StatusCode != http.StatusOK {
			lastStatus, lastBody = a.Res.StatusCode, body
			continue
		}
		gjson.GetBytes(body, "data").ForEach(func(_, m gjson.Result) bool {
			id := m.Get("id").String()
			if id == "" || seen[id] {
				return true
			}
			seen[id] = true
			data = append(data, json.RawMessage(m.Raw))
			return true
		})
	}
	if data == nil {
		switch {
		case lastStatus != 0:
			return c.Blob(lastStatus, echo.MIMEApplicationJSON, lastBody)
		case lastFail != nil:
			return s.writeError(c, lastFail.APIError())
		}
		data = []json.RawMessage{}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

// passThrough forwards any other /v1/* request byte for byte, to a
// provider that serves the API the path belongs to (/messages/count_tokens
// goes where /messages goes). A JSON body is read (bounded) to route by
// its "model"; any other body streams.
func (s *Server) passThrough(c echo.Context) error {
	start := time.Now()
	t, aerr := s.resolveTenant(c)
	if aerr != nil {
		return s.writeError(c, aerr)
	}
	var prov string
	defer func() { s.logPassThrough(c, t, prov, start) }()
	ur, chain, aerr := s.passThroughRequest(c)
	if aerr != nil {
		return s.writeError(c, aerr)
	}
	// A streamed body past the bound is the client's fault, not the
	// provider's: answered 413, recorded nowhere.
	limited, _ := ur.Stream.(*body.Limited)
	tooLarge := func() bool { return limited != nil && limited.Tripped() }
	defer func() {
		if tooLarge() && !c.Response().Committed {
			_ = s.writeError(c, body.ErrTooLarge)
		}
	}()
	ctx := c.Request().Context()
	h := c.Response().Header()
	a, f := upstream.Send(ctx, chain, ur, upstream.Hooks{Fallback: s.countFallback, Failed: func(pf upstream.ProviderFailure) {
		if !tooLarge() && !s.memory.Record(ctx, t, "", pf.Provider, pf.Type, pf.StatusCode, pf.Message) {
			h.Set(HeaderDegraded, "store") // nothing is sent before Send returns
		}
	}})
	defer func() {
		if h.Get(HeaderDegraded) != "" {
			s.metrics.degraded.Inc()
		}
	}()
	if f != nil {
		prov = chain[len(chain)-1].Name()
		if tooLarge() || f.Incident == "" {
			return nil
		}
		return s.writeError(c, f.APIError())
	}
	defer a.Release()
	prov = a.Provider.Name()
	h.Set(HeaderProvider, prov)
	if upstream.Retryable(a.Res.StatusCode) {
		s.recordErrorAnswer(ctx, t, "", a)
	}
	upstream.Deliver(c.Response(), ctx, a, nil)
	s.count("passthrough", a.Res.StatusCode, prov)
	return nil
}

// passThroughRequest builds what a pass-through request sends, and the
// provider it goes to: a JSON body is read (bounded) to route by its
// "model"; any other body streams, bounded.
func (s *Server) passThroughRequest(c echo.Context) (*upstream.Request, []*providers.Provider, *apiError) {
	r := c.Request()
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// Codex CLI tries the Responses API over a WebSocket first and
		// falls back to HTTP at once on 426; the proxy reads and observes
		// HTTP only.
		return nil, nil, &apiError{Status: http.StatusUpgradeRequired, Message: "scarproxy serves this API over HTTP, not WebSocket.", Type: "invalid_request_error", Code: "websocket_not_supported"}
	}
	api, path, aerr := target(r.Method, r.URL.EscapedPath(), c.Param("workspace") != "")
	if aerr != nil {
		return nil, nil, aerr
	}
	ur := &upstream.Request{Method: r.Method, Path: path, Query: upstream.OutgoingQuery(r.URL.RawQuery, s.tenants.Keys()), Header: upstream.OutgoingHeader(r.Header, s.tenants.Keys())}
	if r.ContentLength > s.bodies.MaxBytes() {
		return nil, nil, body.ErrTooLarge
	}
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		b, aerr := s.readBody(c, nil)
		if aerr != nil {
			return nil, nil, aerr
		}
		ur.Body = b
		if m := gjson.GetBytes(b, "model"); m.Type == gjson.String {
			return ur, s.passThroughChain(api, m.Str), nil
		}
	default:
		ur.Stream, ur.Length = body.NewLimited(r.Body, s.bodies.MaxBytes()), r.ContentLength
	}
	return ur, s.passThroughChain(api, geminiModel(api, path)), nil
}

// apiOf returns the API a request belongs to, given its method and its
// path below /v1: a path below /messages or /responses is theirs; a POST
// to /models/{model}:{method} is the Gemini API's
// (":countTokens"...); everything else is Chat Completions'.
func apiOf(method, path string) string {
	for _, api := range []string{providers.APIMessages, providers.APIResponses} {
		if rest, ok := strings.CutPrefix(path, "/"+api); ok && (rest == "" || rest[0] == '/') {
			return api
		}
	}
	if method == http.MethodPost && geminiCall(path) != "" {
		return providers.APIGemini
	}
	return providers.APIChat
}

// geminiCall returns the method of a Gemini model call, path being
// /models/{model}:{method} below the API version ("generateContent" of
// "/models/gemini-2.5-flash:generateContent"), or "" when path is no
// such call.
func geminiCall(path string) string {
	name, ok := strings.CutPrefix(path, "/models/")
	if !ok || strings.IndexByte(name, '/') >= 0 {
		return ""
	}
	i := strings.LastIndexByte(name, ':')
	if i <= 0 || i == len(name)-1 {
		return ""
	}
	for _, c := range name[i+1:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return ""
		}
	}
	return name[i+1:]
}

// geminiModel returns the model a Gemini API path names, a path below the
// provider's root ("/v1beta/models/gemini-2.5-flash:countTokens" gives
// "gemini-2.5-flash"), or "" for a path of another API or none.
func geminiModel(api, path string) string {
	if api != providers.APIGemini {
		return ""
	}
	_, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/models/")
	if !ok {
		return ""
	}
	model, _, _ := strings.Cut(rest, ":")
	if m, err := url.PathUnescape(model); err == nil {
		return m
	}
	return ""
}

// passThroughChain is the one provider a pass-through request goes to: the
// first that serves its API for model, else the default provider.
func (s *Server) passThroughChain(api, model string) []*providers.Provider {
	r := s.providers()
	if chain := r.Route(api, model); len(chain) > 0 {
		return chain[:1]
	}
	return []*providers.Provider{r.Default()}
}

// target returns where a request goes: the API it belongs to and its
// escaped path below that API's root at a provider. escaped is the
// request's path, in its tenant form /w/{workspace}/{project}/... when
// tenantForm says so. The APIs of /v1 have their version in the
// provider's root: "/v1/files/x" and "/w/{ws}/{proj}/v1/files/x" give
// "/files/x". The Gemini API has its version in its paths, which go on
// whole: "/v1beta/models/m:countTokens" and "/v1/models/m:generateContent"
// stay as they are. With the proxy's key injected, a path that could reach
// outside the provider's API is refused (see unsafeSegment), as is a bad
// escape: the error comes with the API, whose shape it takes.
func target(method, escaped string, tenantForm bool) (api, path string, aerr *apiError) {
	rest := escaped
	if tenantForm {
		// "", "w", workspace, project, rest... (names hold no '/').
		parts := strings.SplitN(escaped, "/", 5)
		if len(parts) < 5 {
			return "", "", errBadRequest("bad request path")
		}
		rest = "/" + parts[4]
	}
	path, v1 := strings.CutPrefix(rest, "/v1")
	switch v, ok := strings.CutPrefix(rest, "/v1beta"); {
	case ok && (v == "" || v[0] == '/'):
		api, path = providers.APIGemini, rest
	case !v1:
		api = providers.APIChat // no API's path: OpenAI's errors
	default:
		if api = apiOf(method, path); api == providers.APIGemini {
			path = rest
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if unsafeSegment(seg) {
			return api, "", errBadRequest("bad request path: dot segments (plain or encoded), backslashes and bad escapes are not allowed")
		}
	}
	return api, path, nil
}

// maxUnescape bounds how many times unsafeSegment decodes one segment.
const maxUnescape = 4

// unsafeSegment reports whether one escaped path segment is refused: a bad
// escape; a segment that decodes to "." or ".."; one that decodes to
// something holding a "." or ".." between slashes ("..%2F..%2Fadmin",
// "%2e%2e%2fsecret": servers disagree on whether an encoded slash
// separates segments); and one that holds a backslash, raw or encoded
// (some servers read it as a slash; no API's names hold one). The segment
// is decoded again while it still holds escapes, up to maxUnescape times:
// a server or intermediary that decodes twice turns "%252e%252e" into "..".
// An encoded slash alone is kept: model names hold slashes
// ("meta-llama%2FLlama-3-8B"), and without a dot segment it cannot leave
// the API root. A later decoding that fails is not refused: a literal "%"
// is legitimate once decoded.
func unsafeSegment(seg string) bool {
	u, err := url.PathUnescape(seg)
	if err != nil {
		return true
	}
	for i := 0; ; i++ {
		if strings.IndexByte(u, '\\') >= 0 {
			return true
		}
		for piece := range strings.SplitSeq(u, "/") {
			if piece == "." || piece == ".." {
				return true
			}
		}
		if i == maxUnescape || !strings.Contains(u, "%") {
			return false
		}
		next, err := url.PathUnescape(u)
		if err != nil || next == u {
			return false
		}
		u = next
	}
}
