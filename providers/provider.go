// Package providers holds scarproxy's upstreams: an OpenAI-compatible HTTP
// provider (OpenAI, vLLM, Ollama, OpenRouter, LM Studio...), an Anthropic
// HTTP provider, a Gemini API provider, and the offline mock provider for
// demos and tests (built from package providers/mock).
//
// # Model
//
// A [Provider] is built once at start-up and is an [http.RoundTripper]: the
// proxy hands it a request whose URL path is relative to the provider's API
// root (for example "/chat/completions") and gets the provider's answer back
// unread, so that it can stream, observe and fall back itself. The HTTP
// providers share one [http.Transport] each (connection reuse); the mock
// answers in-process without any network.
//
// # APIs
//
// Each provider serves some of the four wire APIs the proxy speaks
// ([APIChat], [APIResponses], [APIMessages], [APIGemini]); the [Router]
// only sends a request to a provider that serves its API. The provider
// never translates one API into another.
//
// # Imports
//
// This package must not import Echo nor any other scarproxy package than
// providers/mock, which it builds for a provider of type mock.
package providers

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/providers/mock"
)

// Provider types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeGemini    = "gemini"
	TypeMock      = "mock"
)

// APIs, named as in Config.APIs. Each is one POST path under the API root,
// but the Gemini API's, whose paths name the version, the model and the
// method.
const (
	APIChat      = "chat"      // POST /chat/completions (OpenAI Chat Completions)
	APIResponses = "responses" // POST /responses (OpenAI Responses)
	APIMessages  = "messages"  // POST /messages (Anthropic Messages)
	APIGemini    = "gemini"    // POST /v1beta/models/{model}:generateContent and :streamGenerateContent (Gemini API)
)

// DefaultGeminiBaseURL is the API root of a provider of type gemini that
// names none: the Gemini API's host, below which every path names its
// version (/v1beta/models/...).
const DefaultGeminiBaseURL = "https://generativelanguage.googleapis.com"

// AnthropicVersion is the anthropic-version header an anthropic provider
// sends when the client sent none.
const AnthropicVersion = "2023-06-01"

// apiBits maps API names to bits of Provider.apis.
var apiBits = map[string]uint8{APIChat: 1, APIResponses: 2, APIMessages: 4, APIGemini: 8}

// DefaultAPIs returns the APIs a provider of type typ serves when its
// configuration lists none: chat and responses for openai, messages for
// anthropic, gemini for gemini, all four for mock. The slice is new on
// every call.
func DefaultAPIs(typ string) []string {
	switch typ {
	case TypeOpenAI:
		return []string{APIChat, APIResponses}
	case TypeAnthropic:
		return []string{APIMessages}
	case TypeGemini:
		return []string{APIGemini}
	case TypeMock:
		return []string{APIChat, APIResponses, APIMessages, APIGemini}
	}
	return nil
}

// Config is one entry of the `providers:` YAML list.
type Config struct {
	// Name identifies the provider in logs, metrics, incidents and fallbacks.
	Name string `yaml:"name"`
	// Type is "openai" (any OpenAI-compatible HTTP server), "anthropic"
	// (the Anthropic API or a compatible server), "gemini" (the Gemini
	// API) or "mock".
	Type string `yaml:"type"`
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// https://api.anthropic.com/v1. Required for openai and anthropic;
	// for gemini it defaults to [DefaultGeminiBaseURL], the host alone
	// (the Gemini API's paths name their version).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the provider's key.
	// With a key, the provider drops the client's credentials (the
	// Authorization, Api-Key, X-Api-Key, X-Goog-Api-Key and Cookie
	// headers, and "key" query parameters) and sends its own:
	// "Authorization: Bearer" for openai, "x-api-key" for anthropic,
	// "x-goog-api-key" for gemini. When empty (or the variable is unset)
	// the client's credentials are passed through, except in gateway mode
	// where the proxy drops them.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIs lists the wire APIs the provider serves: "chat", "responses",
	// "messages", "gemini". Empty means the type's default (see
	// [DefaultAPIs]): chat and responses for openai, messages for
	// anthropic, gemini for gemini, all for mock. Requests of other APIs
	// are never routed to it.
	APIs []string `yaml:"apis"`
	// Models lists glob patterns (path.Match syntax, e.g. "gpt-4o*") of the
	// models routed to this provider. Empty means the provider serves any
	// model that no other provider claims.
	Models []string `yaml:"models"`
	// Default marks the provider used for models no pattern matches. When
	// no provider is marked, the first one is the default. For an API the
	// default does not serve, the first provider that serves it stands in.
	Default bool `yaml:"default"`
	// Fallbacks names providers tried in order when this one answers 429 or
	// 5xx, times out or is unreachable, before any byte reached the client.
	// A fallback that does not serve the request's API is skipped.
	Fallbacks []string `yaml:"fallbacks"`
	// ResponseHeaderTimeout bounds the wait for the provider's response
	// headers. Default 5m: a non-streaming completion only sends headers
	// when it is complete.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// IdleTimeout bounds the gap between two reads of a response body (the
	// chunks of a stream). It is not a total timeout: a long generation that
	// keeps sending survives. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// DialTimeout bounds establishing a connection. Default 10s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// MaxIdleConnsPerHost caps the idle connections kept to the provider. Default 256.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
}

// Defaults applied by [Config.WithDefaults].
const (
	DefaultResponseHeaderTimeout = 5 * time.Minute
	DefaultIdleTimeout           = 2 * time.Minute
	DefaultDialTimeout           = 10 * time.Second
	DefaultMaxIdleConnsPerHost   = 256
)

// WithDefaults returns c with zero durations and limits set to their
// defaults, and an empty APIs list set to the type's [DefaultAPIs].
func (c Config) WithDefaults() Config {
	if len(c.APIs) == 0 {
		c.APIs = DefaultAPIs(c.Type)
	}
	if c.ResponseHeaderTimeout == 0 {
		c.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	return c
}

// Validate checks one provider entry; prefix names it in messages
// (e.g. "providers[0]").
func (c Config) Validate(prefix string) error {
	if c.Name == "" {
		return fmt.Errorf("%s.name: required", prefix)
	}
	switch c.Type {
	case TypeOpenAI, TypeAnthropic, TypeGemini:
		if c.BaseURL == "" {
			if c.Type == TypeGemini {
				break
			}
			return fmt.Errorf("%s.base_url: required for type %s", prefix, c.Type)
		}
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.base_url: %q is not an http(s) URL", prefix, c.BaseURL)
		}
	case TypeMock:
	case "":
		return fmt.Errorf("%s.type: required (openai, anthropic, gemini or mock)", prefix)
	default:
		return fmt.Errorf("%s.type: %q is not openai, anthropic, gemini or mock", prefix, c.Type)
	}
	for i, a := range c.APIs {
		if _, ok := apiBits[a]; !ok {
			return fmt.Errorf("%s.apis[%d]: %q is not chat, responses, messages or gemini", prefix, i, a)
		}
	}
	for i, m := range c.Models {
		if _, err := path.Match(m, ""); err != nil {
			return fmt.Errorf("%s.models[%d]: bad pattern %q", prefix, i, m)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"response_header_timeout", c.ResponseHeaderTimeout},
		{"idle_timeout", c.IdleTimeout},
		{"dial_timeout", c.DialTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s.%s: must not be negative", prefix, d.key)
		}
	}
	return nil
}

// Provider is one upstream, built once at start-up.
type Provider struct {
	cfg    Config
	apis   uint8 // bits of apiBits
	apiKey string
	base   *url.URL
	rt     http.RoundTripper
}

// New builds the provider described by cfg. getenv reads the API key
// variable (os.Getenv in production).
func New(cfg Config, getenv func(string) string) (*Provider, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate("provider " + cfg.Name); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg}
	for _, a := range cfg.APIs {
		p.apis |= apiBits[a]
	}
	if cfg.APIKeyEnv != "" && getenv != nil {
		p.apiKey = getenv(cfg.APIKeyEnv)
	}
	switch cfg.Type {
	case TypeMock:
		p.rt = mock.New()
	case TypeOpenAI, TypeAnthropic, TypeGemini:
		if cfg.BaseURL == "" {
			cfg.BaseURL = DefaultGeminiBaseURL // only gemini may name none
			p.cfg.BaseURL = cfg.BaseURL
		}
		u, err := url.Parse(cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("provider %s: base_url: %w", cfg.Name, err)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		p.base = u
		p.rt = newTransport(cfg)
	}
	return p, nil
}

func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialCopyConns(dialer.DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
		// The proxy enforces the header timeout itself (for every provider
		// type alike); compression is left to the client and provider so
		// that bytes pass through untouched.
		DisableCompression: true,
	}
}

// Name returns the configured name.
func (p *Provider) Name() string { return p.cfg.Name }

// Config returns the configuration with defaults applied.
func (p *Provider) Config() Config { return p.cfg }

// ServesAPI reports whether the provider serves api (one of the API*
// constants). An unknown name is served by nobody.
func (p *Provider) ServesAPI(api string) bool {
	b := apiBits[api]
	return b != 0 && p.apis&b != 0
}

// Serves reports whether model is routed to this provider by its Models
// patterns. A provider without patterns serves nothing explicitly.
func (p *Provider) Serves(model string) bool {
	for _, pat := range p.cfg.Models {
		if ok, _ := path.Match(pat, model); ok {
			return true
		}
	}
	return false
}

// Client credential headers a provider with its own key drops: a gateway
// holding the provider key must not leak the client's credentials upstream.
var clientCredentials = []string{"Authorization", "Api-Key", "X-Api-Key", "X-Goog-Api-Key", "Cookie"}

// DropQueryKey returns the escaped query raw without its "key" parameters
// (where a Gemini API client may put its key); the other parameters keep
// their bytes and order, and a query without one is raw itself.
func DropQueryKey(raw string) string {
	if !strings.Contains(raw, "key") && !strings.Contains(raw, "%") {
		return raw
	}
	var kept []string
	dropped := false
	for param := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(param, "=")
		if n, err := url.QueryUnescape(name); name == "key" || err == nil && n == "key" {
			dropped = true
			continue
		}
		kept = append(kept, param)
	}
	if !dropped {
		return raw
	}
	return strings.Join(kept, "&")
}

// RoundTrip sends req to the provider. req.URL.Path must be relative to the
// API root ("/chat/completions"; a gemini provider's root is its host, and
// the path names the version: "/v1beta/models/m:generateContent"); the
// query is kept. When the provider has a key, it replaces the client's
// credentials (headers, and "key" query parameters) with its own
// (Authorization: Bearer for openai and mock, x-api-key for anthropic,
// x-goog-api-key for gemini); without one they pass through untouched. An
// anthropic provider also sets anthropic-version to [AnthropicVersion]
// when the client sent none. req is modified.
func (p *Provider) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.base != nil {
		rel := req.URL
		u := *p.base
		u.Path = p.base.Path + rel.Path
		u.RawPath = ""
		if p.base.RawPath != "" || rel.RawPath != "" {
			u.RawPath = p.base.EscapedPath() + rel.EscapedPath()
		}
		u.RawQuery = rel.RawQuery
		req.URL = &u
		req.Host = u.Host
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if p.apiKey != "" {
		for _, h := range clientCredentials {
			req.Header.Del(h)
		}
		req.URL.RawQuery = DropQueryKey(req.URL.RawQuery)
		switch p.cfg.Type {
		case TypeAnthropic:
			req.Header.Set("X-Api-Key", p.apiKey)
		case TypeGemini:
			req.Header.Set("X-Goog-Api-Key", p.apiKey)
		default:
			req.Header.Set("Authorization", "Bearer "+p.apiKey)
		}
	}
	if p.cfg.Type == TypeAnthropic && req.Header.Get("Anthropic-Version") == "" {
		req.Header.Set("Anthropic-Version", AnthropicVersion)
	}
	return p.rt.RoundTrip(req)
}

// CloseIdleConnections releases idle connections of the HTTP transport.
func (p *Provider) CloseIdleConnections() {
	if t, ok := p.rt.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}
