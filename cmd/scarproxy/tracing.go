package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracingConfig is the `tracing:` section: OpenTelemetry traces, off
// unless an endpoint is set.
type TracingConfig struct {
	// OTLPEndpoint is the OTLP/HTTP collector traces go to, e.g.
	// http://otel-collector:4318 (then to its /v1/traces), or a URL with
	// the path to use. Empty: no traces. The exporter's OTEL_EXPORTER_OTLP_*
	// variables (headers, timeout, certificates) apply.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}

// tracesURL returns the URL spans are sent to, or an error naming the key.
func (t TracingConfig) tracesURL() (string, error) {
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("tracing.otlp_endpoint: %q is not an http(s) URL, e.g. http://otel-collector:4318", t.OTLPEndpoint)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// newTracerProvider returns the tracer provider of the configuration, or
// nil when tracing is off. Spans go out in batches, in the background;
// Shutdown sends what is left.
func newTracerProvider(ctx context.Context, cfg TracingConfig, version string) (*sdktrace.TracerProvider, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	u, err := cfg.tracesURL()
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "scarproxy"), attribute.String("service.version", version))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// shutdownTracing sends the spans not yet sent, within timeout.
func shutdownTracing(tp *sdktrace.TracerProvider, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("sending the last spans failed", "err", err)
	}
}
