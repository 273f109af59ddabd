package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is serve's OpenTelemetry export: spans and metrics over OTLP
// (http/protobuf) when the environment names a collector, the standard
// OTEL_* variables configuring it. A nil *telemetry exports nothing.
type telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// defaultServiceName is service.name when OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) names none.
const defaultServiceName = "contextos"

// signalOn reports whether the environment exports a signal ("TRACES"
// or "METRICS"): OTEL_EXPORTER_OTLP_ENDPOINT or the signal's own endpoint
// is set, and OTEL_{signal}_EXPORTER is not "none". Another exporter than
// otlp is refused by name.
func signalOn(getenv func(string) string, signal string) (bool, error) {
	v := "OTEL_" + signal + "_EXPORTER"
	switch e := strings.TrimSpace(getenv(v)); e {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("%s=%q: contextos serve exports over OTLP only (otlp or none)", v, e)
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "", nil
}

// checkHeaders refuses an OTEL_EXPORTER_OTLP_*HEADERS value the exporters
// would not read whole ("key=value" pairs, comma-separated, the values
// URL-encoded): they log a malformed pair with its value — a collector's
// token — and export without it. The error names the variable and the
// pair's position, never its text.
func checkHeaders(getenv func(string) string) error {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"} {
		val := getenv(v)
		if val == "" {
			continue
		}
		for i, pair := range strings.Split(val, ",") {
			name, value, found := strings.Cut(pair, "=")
			name = strings.TrimSpace(name)
			_, err := url.PathUnescape(value)
			switch {
			case !found:
				return fmt.Errorf("%s: pair %d is not key=value (the value is not shown)", v, i+1)
			case name == "" || strings.IndexFunc(name, func(c rune) bool { return !headerKeyChar(c) }) >= 0:
				return fmt.Errorf("%s: pair %d's key is not an HTTP header name", v, i+1)
			case err != nil:
				return fmt.Errorf("%s: pair %d's value is not URL-encoded (the value is not shown)", v, i+1)
			}
		}
	}
	return nil
}

// headerKeyChar reports whether c may be in an HTTP header name (RFC
// 9110's token).
func headerKeyChar(c rune) bool {
	return c < 0x80 && (unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c))
}

// newTelemetry starts the export the environment asks for: nil (no
// export) unless OTEL_EXPORTER_OTLP_ENDPOINT or a signal's endpoint is
// set (a signal's endpoint alone exports that signal only;
// OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER set to none turns one
// off), or when OTEL_SDK_DISABLED is true. The exporters read the rest of
// the standard variables themselves (headers, timeout, compression,
// certificates), the tracer provider OTEL_TRACES_SAMPLER, the batcher
// OTEL_BSP_*, the metric reader OTEL_METRIC_EXPORT_INTERVAL, the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. A protocol other than
// http/protobuf is refused by name, and so are malformed headers (without
// their value). Nothing is sent until there is something to send: a
// collector that is down is not a start-up error.
func newTelemetry(ctx context.Context, getenv func(string) string) (*telemetry, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	traces, err := signalOn(getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := signalOn(getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	if !traces && !metrics {
		return nil, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%q: contextos serve exports OTLP over http/protobuf only", v, p)
		}
	}
	if err := checkHeaders(getenv); err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	t := &telemetry{}
	if traces {
		te, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
	}
	if metrics {
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			_ = t.shutdown(ctx)
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)), sdkmetric.WithResource(res))
	}
	return t, nil
}

// tracerProvider is nil without a trace export (the runtime's and the
// handler's default: no spans).
func (t *telemetry) tracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp
}

// meterProvider is nil without a metric export (no metrics).
func (t *telemetry) meterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return nil
	}
	return t.mp
}

// shutdown sends what is buffered (the spans of the last runs, the last
// metric readings) and stops the exporters.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
