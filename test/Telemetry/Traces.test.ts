/**
 * Traces an SRE can follow (issue 8 items 1, 2 and 6), with an in-memory span
 * exporter and metric reader: the server span of an ingest call (HTTP semantic
 * conventions: name `{method} {route}`, `http.route`, status), its service
 * span and SQL spans; the outbox event carrying the call's trace context, the
 * webhook delivery span in that trace with `traceparent` on the request (W4);
 * the automatic reply's job span linked into the call's trace, the runtime's
 * run span under it, whose reply is delivered in the run's trace; and the
 * metrics being recorded.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { assert } from "@effect/vitest"
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader
} from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { servicesWith } from "../../src/Server.ts"
import { aiFixture, messagesOf, runsOf, snapshotOf, waitFor } from "../Replies/support.ts"
import { llm } from "../support/Assistants.ts"
import { eventually, receiver } from "../support/Receiver.ts"
import { makeScript, scriptedModel } from "../support/ScriptedModel.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"

const exporter = new InMemorySpanExporter()
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
const metricReader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 })
const tracing = NodeSdk.layer(() => ({
  resource: { serviceName: "parley-test" },
  spanProcessor: new SimpleSpanProcessor(exporter),
  metricReader
}))
const script = makeScript()

const SERVER = 1
const spans = () => exporter.getFinishedSpans()
const byName = (name: string) => spans().filter((span) => span.name === name)
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId
const traceparentTrace = (traceparent: string) => traceparent.split("-")[1]

withWorkers({ allowPrivateNetworkTargets: true }, servicesWith(scriptedModel(script)), { tracing })("traces", (it) => {
  it.effect(
    "an ingest call, its event, its webhook delivery and the AI reply it triggers form one linked set of traces",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const hooks = yield* receiver()
        const fx = yield* aiFixture(snapshotOf([llm("start")]))
        const settings = yield* api.request("PATCH", `/admin/v1/organizations/${fx.org.id}/settings`, {
          token: ADMIN_TOKEN,
          body: { reply_debounce_seconds: 0 }
        })
        assert.strictEqual(settings.status, 200, settings.text)
        const app = yield* api.request("POST", `/admin/v1/organizations/${fx.org.id}/apps`, {
          token: ADMIN_TOKEN,
          body: { name: "hooks", webhook_url: hooks.url, events: ["message.created"] }
        })
        assert.strictEqual(app.status, 201, app.text)

        // 1. A channel integration's ingest call, continuing its own trace.
        const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
        const ingested = yield* api.request("POST", "/conversations/v2/api/v1/ingest", {
          token: fx.org.token,
          headers: { traceparent: `00-${clientTrace}-00f067aa0ba902b7-01`, "x-request-id": "bridge-42" },
          body: { to: "+15550000", from: "+15551234", agent_id: fx.agentId, content: { type: "text", text: "Hello" } }
        })
        assert.strictEqual(ingested.status, 200, ingested.text)
        const sessionId: string = ingested.body.session_id
        const server = yield* waitFor(
          Effect.sync(() => byName("POST /conversations/v2/api/v1/ingest")),
          (found) => found.some((span) => span.spanContext().traceId === clientTrace)
        ).pipe(Effect.map((found) => found.find((span) => span.spanContext().traceId === clientTrace)!))
        assert.strictEqual(server.kind, SERVER)
        assert.strictEqual(parentOf(server), "00f067aa0ba902b7", "continues the client's trace")
        assert.strictEqual(server.attributes["http.route"], "/conversations/v2/api/v1/ingest")
        assert.strictEqual(server.attributes["http.request.method"], "POST")
        assert.strictEqual(server.attributes["http.response.status_code"], 200)
        // O8: the request id the client sent is echoed and on the server span.
        assert.strictEqual(ingested.headers.get("x-request-id"), "bridge-42")
        assert.strictEqual(server.attributes["parley.request_id"], "bridge-42")
        const service = byName("Ingest.ingest").find((span) => parentOf(span) === server.spanContext().spanId)
        assert.ok(service !== undefined, "the service span is a child of the server span")
        const descendants = (root: ReadableSpan): Array<ReadableSpan> => {
          const children = spans().filter((span) => parentOf(span) === root.spanContext().spanId)
          return children.flatMap((child) => [child, ...descendants(child)])
        }
        const sqlSpans = descendants(service).filter((span) => span.attributes["db.system.name"] !== undefined)
        assert.ok(
          sqlSpans.length >= 2,
          `SQL spans under the service span: ${descendants(service)
            .map((s) => s.name)
            .join(", ")}`
        )

        // 2. The outbox event carries the call's trace; its webhook delivery continues it (W4).
        const [event] = yield* sql<{ id: string; traceparent: string }>`
        SELECT id, trace_context->>'traceparent' AS traceparent FROM events
        WHERE organization_id = ${fx.org.id} AND type = 'message.created' ORDER BY created_at LIMIT 1`
        assert.strictEqual(traceparentTrace(event!.traceparent), clientTrace)
        yield* eventually(
          () => hooks.received.some((r) => r.headers["webhook-id"] === event!.id),
          10_000,
          "the webhook"
        )
        const delivered = hooks.received.find((r) => r.headers["webhook-id"] === event!.id)!
        assert.strictEqual(traceparentTrace(String(delivered.headers.traceparent)), clientTrace)
        const attempt = yield* waitFor(
          Effect.sync(() => byName("Webhooks.attempt").find((s) => s.attributes["parley.event_id"] === event!.id)),
          (found) => found !== undefined
        )
        assert.strictEqual(attempt!.spanContext().traceId, clientTrace)

        // 3. The automatic reply (D11): the job's span links into the ingest call's trace; the run is
        //    its child; the reply's event and webhook delivery are in the run's trace.
        const [run] = yield* waitFor(runsOf(sessionId), (rows) => rows.length === 1)
        const job = yield* waitFor(
          Effect.sync(() => byName("Replies.job").filter((s) => s.attributes["parley.session_id"] === sessionId)),
          (found) => found.length === 1
        ).pipe(Effect.map((found) => found[0]!))
        assert.deepStrictEqual(
          job.links.map((link) => link.context.traceId),
          [clientTrace]
        )
        const trigger = spans().find((span) => span.spanContext().spanId === job.links[0]!.context.spanId)!
        assert.strictEqual(trigger.name, "Replies.trigger")
        assert.ok(descendants(service).includes(trigger), "triggered inside Ingest.ingest")
        const runSpan = byName("Runtime.run").find((span) => parentOf(span) === job.spanContext().spanId)
        assert.ok(runSpan !== undefined, "the run span is a child of the job span")
        assert.strictEqual(runSpan.attributes["parley.run_id"], run!.id)
        const answer = (yield* messagesOf(fx.org, sessionId)).at(-1)
        assert.strictEqual(answer.run_id, run!.id)
        const [answerEvent] = yield* sql<{ id: string; traceparent: string }>`
        SELECT id, trace_context->>'traceparent' AS traceparent FROM events
        WHERE organization_id = ${fx.org.id} AND type = 'message.created' AND body LIKE ${`%${answer.id}%`}`
        assert.strictEqual(traceparentTrace(answerEvent!.traceparent), job.spanContext().traceId)
        const answerAttempt = yield* waitFor(
          Effect.sync(() =>
            byName("Webhooks.attempt").find((s) => s.attributes["parley.event_id"] === answerEvent!.id)
          ),
          (found) => found !== undefined
        )
        assert.strictEqual(answerAttempt!.spanContext().traceId, job.spanContext().traceId)
      })
  )

  it.effect("metrics: request duration by route and status, webhook attempts, reply latency, runs, gauges", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const hooks = yield* receiver()
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      yield* api.request("POST", `/admin/v1/organizations/${fx.org.id}/apps`, {
        token: ADMIN_TOKEN,
        body: { name: "hooks", webhook_url: hooks.url, events: ["session.created"] }
      })
      const session = yield* fx.session()
      yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })
      yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      yield* eventually(() => hooks.received.length >= 1, 10_000, "the webhook")
      yield* fx.org.call("GET", "/sessions/not-a-session")
      yield* Effect.promise(() => metricReader.forceFlush())
      const metrics = metricExporter
        .getMetrics()
        .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
      const points = (name: string) =>
        metrics.filter((m) => m.descriptor.name === name).flatMap((m) => m.dataPoints as Array<any>)
      const routes = points("http.server.request.duration").map((p) => [
        p.attributes["http.request.method"],
        p.attributes["http.route"],
        p.attributes["http.response.status_code"]
      ])
      // Effect's metric attributes reach OpenTelemetry as strings.
      assert.deepInclude(routes, ["POST", "/conversations/v2/api/v1/sessions/:session_id/reply", "200"])
      assert.deepInclude(routes, ["GET", "/conversations/v2/api/v1/sessions/:session_id", "404"])
      assert.ok(points("parley.webhook.attempts").some((p) => p.attributes.outcome === "succeeded" && p.value >= 1))
      assert.ok(points("parley.webhook.attempt.duration").length > 0)
      assert.ok(points("parley.reply.latency").some((p) => p.attributes.status === "succeeded"))
      assert.ok(points("parley.runs").some((p) => p.attributes.trigger === "reply" && p.value >= 1))
      assert.deepStrictEqual(
        points("parley.queue.depth")
          .map((p) => p.attributes.queue)
          .sort(),
        ["deliveries", "reply_jobs", "reply_jobs_running", "schedules"]
      )
      assert.strictEqual(points("parley.outbox.lag").length, 1)
      assert.ok(
        points("parley.db.connections").some((p) => p.attributes.state === "idle" || p.attributes.state === "active")
      )
    })
  )

  it.effect("no span carries what a contact, an agent or the AI wrote (issue 40 item 4)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const settings = yield* api.request("PATCH", `/admin/v1/organizations/${fx.org.id}/settings`, {
        token: ADMIN_TOKEN,
        body: { reply_debounce_seconds: 0 }
      })
      assert.strictEqual(settings.status, 200, settings.text)
      // Every piece of a person's data carries the mark; the scripted model answers "Reply to: <text>".
      const mark = "Zq7Mark"
      const ingested = yield* api.request("POST", "/conversations/v2/api/v1/ingest", {
        token: fx.org.token,
        body: {
          to: "+15550000",
          from: "+15557777",
          agent_id: fx.agentId,
          contact: { name: `${mark} name` },
          content: { type: "text", text: `${mark} contact words` }
        }
      })
      assert.strictEqual(ingested.status, 200, ingested.text)
      const sessionId: string = ingested.body.session_id
      yield* waitFor(runsOf(sessionId), (rows) => rows.length === 1)
      const posted = yield* api.request("POST", `/conversations/v2/api/v1/sessions/${sessionId}/messages`, {
        token: fx.org.token,
        body: { role: "assistant", content: { type: "text", text: `${mark} agent words` } }
      })
      assert.strictEqual(posted.status, 201, posted.text)
      const answer = (yield* messagesOf(fx.org, sessionId)).find((m: { run_id: string | null }) => m.run_id !== null)
      assert.include(answer.content.text, mark, "the AI's answer carries the mark")
      const finished = yield* waitFor(
        Effect.sync(() => byName("Runtime.run").filter((span) => span.attributes["parley.session_id"] === sessionId)),
        (found) => found.length === 1
      )
      assert.strictEqual(finished.length, 1)
      const carrying = spans()
        .map((span) => ({
          name: span.name,
          attributes: span.attributes,
          events: span.events.map((event) => ({ name: event.name, attributes: event.attributes })),
          status: span.status
        }))
        .filter((span) => JSON.stringify(span).includes(mark))
      assert.deepStrictEqual(carrying, [], "spans carrying message content or a contact's name")
    })
  )
})
