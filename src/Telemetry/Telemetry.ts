/**
 * Traces, metrics and logs. With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans (every
 * `Effect.fn` service method, SQL statements, HTTP requests) are exported by
 * OTLP over HTTP to `<endpoint>/v1/traces` and metrics (`Metrics.ts`) to
 * `<endpoint>/v1/metrics`; spans are sampled by the standard
 * `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables; without it,
 * nothing is installed and spans cost next to nothing.
 *
 * Logs are JSON lines (`LOG_FORMAT=json`) or pretty (`pretty`, the default on a
 * TTY), filtered by `LOG_LEVEL`.
 */
import { Context, Effect, Layer, Logger, References, Tracer } from "effect"
import { AppConfig } from "../Config.ts"

/** How often metrics are exported, in ms. */
const METRICS_EXPORT_INTERVAL_MS = 15_000

/**
 * OTLP export of traces (`<endpoint>/v1/traces`) and metrics
 * (`<endpoint>/v1/metrics`, every {@link METRICS_EXPORT_INTERVAL_MS}; see
 * `Metrics.ts`) when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else nothing.
 * Requires `AppConfig`.
 */
export const TracingLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (config.otlpEndpoint === undefined) return Layer.empty
    const base = config.otlpEndpoint.replace(/\/+$/, "")
    // Loaded only when exporting: without an endpoint the SDK's modules stay out of the process's memory
    // (issue 44: `npm run bench -- memory`, bench/README.md "memory").
    const [
      NodeSdk,
      { OTLPMetricExporter },
      { OTLPTraceExporter },
      { PeriodicExportingMetricReader },
      { BatchSpanProcessor }
    ] = yield* Effect.promise(() =>
      Promise.all([
        import("@effect/opentelemetry/NodeSdk"),
        import("@opentelemetry/exporter-metrics-otlp-http"),
        import("@opentelemetry/exporter-trace-otlp-http"),
        import("@opentelemetry/sdk-metrics"),
        import("@opentelemetry/sdk-trace-base")
      ])
    )
    return NodeSdk.layer(() => ({
      resource: { serviceName: config.serviceName, serviceVersion: "0.1.0" },
      spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter({ url: `${base}/v1/traces` })),
      metricReader: new PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }),
        exportIntervalMillis: METRICS_EXPORT_INTERVAL_MS
      })
    }))
  })
)

/**
 * JSON lines: Effect's structured fields (`message`, `level`, `timestamp`,
 * `cause`, `annotations`, `spans`, `fiberId`) plus `trace_id` and `span_id` of
 * the span the entry was logged in, so a log line leads to its trace.
 * `write` receives each line (standard output by default).
 */
export const jsonLogger = (write: (line: string) => void = (line) => process.stdout.write(line)) =>
  Logger.make((options) => {
    const span = Context.getOption(options.fiber.context, Tracer.ParentSpan)
    const entry = Logger.formatStructured.log(options)
    write(
      `${JSON.stringify(
        span._tag === "Some" ? { ...entry, trace_id: span.value.traceId, span_id: span.value.spanId } : entry
      )}\n`
    )
  })

/** The structured logger of `LOG_FORMAT` at `LOG_LEVEL`. Requires `AppConfig`. */
export const LoggingLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const logger = config.logFormat === "json" ? jsonLogger() : Logger.consolePretty()
    return Layer.merge(Logger.layer([logger]), Layer.succeed(References.MinimumLogLevel, config.logLevel))
  })
)

/**
 * The W3C `traceparent` of the current span (`00-<trace id>-<span id>-<flags>`),
 * or null outside any span. Stored with events, reply jobs and schedules so the
 * work they cause links back to the request that caused it (issue 8, W4).
 */
export const currentTraceparent: Effect.Effect<string | null> = Effect.map(Effect.option(Effect.currentSpan), (span) =>
  span._tag === "None" ? null : `00-${span.value.traceId}-${span.value.spanId}-${span.value.sampled ? "01" : "00"}`
)

/**
 * The current span's trace context as stored with outbox events, reply jobs and
 * schedules: JSON text `{"traceparent": "00-..."}`, or null outside any span.
 */
export const currentTraceContext: Effect.Effect<string | null> = Effect.map(currentTraceparent, (traceparent) =>
  traceparent === null ? null : JSON.stringify({ traceparent })
)

/** A stored W3C `traceparent` as an external span (to parent or link to), or undefined when absent or malformed. */
export const spanOfTraceparent = (traceparent: string | null | undefined): Tracer.ExternalSpan | undefined => {
  if (traceparent == null) return undefined
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent)
  if (match === null) return undefined
  return Tracer.externalSpan({
    traceId: match[1]!,
    spanId: match[2]!,
    sampled: (Number.parseInt(match[3]!, 16) & 1) === 1
  })
}

/** Logging and tracing together. */
export const layer = Layer.merge(LoggingLive, TracingLive)
