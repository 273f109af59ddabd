package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// The environment variables that turn the export on: the OTLP endpoint
// for every signal or for one.
var otlpEndpointVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// defaultServiceName is service.name when OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) names none.
const defaultServiceName = "contextos"

// newTelemetry starts the export the environment asks for: nil (no
// export) unless one of otlpEndpointVars is set, or when
// OTEL_SDK_DISABLED is true. The exporters read the rest of the standard
// variables themselves (headers, timeout, compression, certificates), the
// tracer provider OTEL_TRACES_SAMPLER, the batcher OTEL_BSP_*, the
// metric reader OTEL_METRIC_EXPORT_INTERVAL, the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. A protocol other than
// http/protobuf is refused by name. Nothing is sent until there is
// something to send: a collector that is down is not a start-up error.
func newTelemetry(ctx context.Context, getenv func(string) string) (*telemetry, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	on := false
	for _, v := range otlpEndpointVars {
		on = on || getenv(v) != ""
	}
	if !on {
		return nil, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%q: contextos serve exports OTLP over http/protobuf only", v, p)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	te, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	me, err := otlpmetrichttp.New(ctx)
	if err != nil {
		_ = te.Shutdown(ctx)
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return &telemetry{
		tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res)),
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)), sdkmetric.WithResource(res)),
	}, nil
}

// tracerProvider is nil without an export (the runtime's and the
// handler's default: no spans).
func (t *telemetry) tracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// meterProvider is nil without an export (no metrics).
func (t *telemetry) meterProvider() metric.MeterProvider {
	if t == nil {
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
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}
