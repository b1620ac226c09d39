/**
 * A local OTLP/HTTP receiver for benchmarks (node:http on 127.0.0.1, in the
 * benchmark process): responds to POST /v1/traces and /v1/metrics with 200 and
 * counts what it received. JSON bodies (`application/json`, the encoding of
 * `@opentelemetry/exporter-trace-otlp-http`) are parsed and their spans
 * counted (`resourceSpans[].scopeSpans[].spans[]`), by name, service and kind,
 * server spans also by request path; gzip
 * bodies are inflated first; a protobuf body cannot be decoded here, so only
 * its requests and bytes are counted (`protobufRequests`).
 */
import { createServer, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { gunzipSync } from "node:zlib"

/** What the receiver has received so far (cumulative). */
export interface OtlpCounts {
  /** POST /v1/traces requests. */
  readonly traceRequests: number
  /** POST /v1/metrics requests. */
  readonly metricRequests: number
  /** Requests to any other path (responded to with 404). */
  readonly otherRequests: number
  /** Trace requests whose body was protobuf (spans not counted). */
  readonly protobufRequests: number
  /** Body bytes of trace requests as sent (before inflating). */
  readonly traceBytes: number
  readonly metricBytes: number
  /** Spans in JSON trace requests. */
  readonly spans: number
  /** Spans of kind SERVER (2): one per traced HTTP request. */
  readonly serverSpans: number
  /** Spans by name. */
  readonly spansByName: Readonly<Record<string, number>>
  /** Spans by the `service.name` of their resource (`OTEL_SERVICE_NAME`). */
  readonly spansByService: Readonly<Record<string, number>>
}

/** A running receiver: `url` is the value for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
export interface OtlpReceiver {
  readonly url: string
  /** A copy of the counts now. */
  readonly counts: () => OtlpCounts
  /**
   * Server spans received so far whose request path (`url.path`, else that of
   * `url.full`) is `path`, by `http.response.status_code` ("?" when absent).
   */
  readonly serverSpansOfPath: (path: string) => Readonly<Record<string, number>>
  /**
   * Resolves once a request arrived after `since` (performance.now() ms) and
   * none for `quietMs` since: an exporter that batches on a timer (the
   * BatchSpanProcessor, every 5 s) has then sent every span it held at `since`.
   * Resolves after `maxMs` in any case; returns whether it saw that request.
   */
  readonly flushedAfter: (since: number, quietMs: number, maxMs: number) => Promise<boolean>
  readonly close: () => Promise<void>
}

/** OTLP span kind SERVER (JSON encodes the enum as its number). */
const SPAN_KIND_SERVER = 2

const readBody = (request: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

/** Starts a receiver on a free loopback port. */
export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const counts = {
    traceRequests: 0,
    metricRequests: 0,
    otherRequests: 0,
    protobufRequests: 0,
    traceBytes: 0,
    metricBytes: 0,
    spans: 0,
    serverSpans: 0
  }
  const byName = new Map<string, number>()
  const byService = new Map<string, number>()
  const serverByPath = new Map<string, Map<string, number>>()
  const pathOf = (attributes: ReadonlyArray<any>): string | undefined => {
    const value = (key: string) => attributes.find((a) => a?.key === key)?.value?.stringValue
    const path = value("url.path")
    if (typeof path === "string") return path
    const full = value("url.full")
    if (typeof full !== "string") return undefined
    try {
      return new URL(full).pathname
    } catch {
      return undefined
    }
  }
  let last: number | undefined
  const countSpans = (body: any) => {
    for (const resource of body?.resourceSpans ?? []) {
      const attributes: ReadonlyArray<any> = resource?.resource?.attributes ?? []
      const service = String(attributes.find((a) => a?.key === "service.name")?.value?.stringValue ?? "?")
      for (const scope of resource?.scopeSpans ?? []) {
        for (const span of scope?.spans ?? []) {
          counts.spans++
          byService.set(service, (byService.get(service) ?? 0) + 1)
          if (span.kind === SPAN_KIND_SERVER || span.kind === "SPAN_KIND_SERVER") {
            counts.serverSpans++
            const attributes: ReadonlyArray<any> = span.attributes ?? []
            const path = pathOf(attributes)
            if (path !== undefined) {
              const status = attributes.find((a) => a?.key === "http.response.status_code")?.value?.intValue
              const byStatus = serverByPath.get(path) ?? new Map<string, number>()
              const key = status === undefined ? "?" : String(status)
              byStatus.set(key, (byStatus.get(key) ?? 0) + 1)
              serverByPath.set(path, byStatus)
            }
          }
          const name = String(span.name)
          byName.set(name, (byName.get(name) ?? 0) + 1)
        }
      }
    }
  }
  const server = createServer((request, response) => {
    last = performance.now()
    const path = (request.url ?? "").split("?")[0]
    readBody(request).then(
      (raw) => {
        last = performance.now()
        const type = request.headers["content-type"] ?? ""
        const json = type.includes("json")
        if (request.method === "POST" && path === "/v1/traces") {
          counts.traceRequests++
          counts.traceBytes += raw.length
          if (json) {
            const body = request.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw
            try {
              countSpans(JSON.parse(body.toString("utf8")))
            } catch {
              // A malformed body still counts as a request; its spans are unknown.
            }
          } else {
            counts.protobufRequests++
          }
        } else if (request.method === "POST" && path === "/v1/metrics") {
          counts.metricRequests++
          counts.metricBytes += raw.length
        } else {
          counts.otherRequests++
          response.writeHead(404).end()
          return
        }
        // An empty Export*ServiceResponse: `{}` in JSON, zero bytes in protobuf.
        if (json) response.writeHead(200, { "content-type": "application/json" }).end("{}")
        else response.writeHead(200, { "content-type": "application/x-protobuf" }).end()
      },
      () => response.writeHead(400).end()
    )
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    counts: () => ({
      ...counts,
      spansByName: Object.fromEntries(byName),
      spansByService: Object.fromEntries(byService)
    }),
    serverSpansOfPath: (path) => Object.fromEntries(serverByPath.get(path) ?? []),
    flushedAfter: async (since, quietMs, maxMs) => {
      const deadline = performance.now() + maxMs
      for (;;) {
        const now = performance.now()
        if (last !== undefined && last > since && now - last >= quietMs) return true
        if (now >= deadline) return false
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

const difference = (before: Readonly<Record<string, number>>, after: Readonly<Record<string, number>>) => {
  const result: Record<string, number> = {}
  for (const [key, n] of Object.entries(after)) {
    const delta = n - (before[key] ?? 0)
    if (delta > 0) result[key] = delta
  }
  return result
}

/** `after - before` of every count (by name and by service too, zero entries dropped). */
export const countsBetween = (before: OtlpCounts, after: OtlpCounts): OtlpCounts => {
  return {
    traceRequests: after.traceRequests - before.traceRequests,
    metricRequests: after.metricRequests - before.metricRequests,
    otherRequests: after.otherRequests - before.otherRequests,
    protobufRequests: after.protobufRequests - before.protobufRequests,
    traceBytes: after.traceBytes - before.traceBytes,
    metricBytes: after.metricBytes - before.metricBytes,
    spans: after.spans - before.spans,
    serverSpans: after.serverSpans - before.serverSpans,
    spansByName: difference(before.spansByName, after.spansByName),
    spansByService: difference(before.spansByService, after.spansByService)
  }
}
