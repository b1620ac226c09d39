/**
 * `npm run bench -- webhooks`: webhook delivery (issue 4; DECISIONS.md W2-W5)
 * from one Parley process to a local receiver (node:http on 127.0.0.1, in the
 * benchmark process), on a dedicated database.
 *
 * 1. Throughput: BENCH_WEBHOOK_EVENTS (10,000) message.created events committed
 *    in one transaction (the fan-out makes one delivery each); deliveries/s from
 *    the commit until the receiver has every event id. Goal >= 1,500/s.
 * 2. Latency: the same number of events committed one per statement at a steady
 *    BENCH_WEBHOOK_RATE (500) events/s; commit-to-receipt latency (the INSERT's
 *    acknowledgement to the receiver's complete request, one clock) p50/p99.
 *    Goal p50 <= 20 ms.
 *
 * Events are inserted with SQL, as a service's outbox insert does, so the
 * Parley process does only the delivery work. Prints a table and writes
 * bench/results/webhooks-<timestamp>.{json,md}. BENCH_DATABASE_URL as in the
 * messages benchmark.
 */
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { makeCleanup } from "../lib/cleanup.ts"
import { startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { startParley } from "../lib/parley.ts"
import { cpuSeconds } from "../lib/proc.ts"
import { rootDirectory, sleep } from "../lib/process.ts"
import { environment, writeResults } from "../lib/results.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

/** A message.created envelope of a realistic size (about 600 bytes). */
const envelope = (id: string, organizationId: string) =>
  JSON.stringify({
    id,
    timestamp: Math.floor(Date.now() / 1000),
    type: "message.created",
    organization_id: organizationId,
    data: {
      object: {
        id: randomUUID(),
        session_id: randomUUID(),
        conversation_id: randomUUID(),
        organization_id: organizationId,
        role: "assistant",
        content: { type: "text", text: "Hello from the webhook benchmark" },
        provider_message_id: null,
        replied_provider_message_id: null,
        run_id: null,
        delivery_status: "pending",
        delivery_error_code: null,
        delivery_error_message: null,
        delivered_at: null,
        metadata: {},
        created_at: new Date().toISOString(),
        updated_at: null
      }
    }
  })

export const run = async (_args: ReadonlyArray<string>) => {
  const events = envInt("BENCH_WEBHOOK_EVENTS", 10_000)
  const rate = envInt("BENCH_WEBHOOK_RATE", 500)
  const startedAt = new Date()
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_webhooks")
    cleanup.add("database", database.close)
    log(
      `webhooks: ${events} events, throughput burst then ${rate} events/s; database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion})`
    )

    // The receiver: records the receipt time of every webhook-id.
    const receivedAt = new Map<string, number>()
    let requests = 0
    const receiver = createServer((request, response) => {
      request.on("data", () => undefined)
      request.on("end", () => {
        requests++
        const id = String(request.headers["webhook-id"])
        if (!receivedAt.has(id)) receivedAt.set(id, performance.now())
        response.statusCode = 200
        response.end()
      })
    })
    receiver.keepAliveTimeout = 60_000
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    cleanup.add("receiver", () => new Promise((resolve) => receiver.close(resolve)))
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

    const {
      server: parley,
      adminToken,
      organizationId
    } = await startParley(database.url, cleanup, {
      ALLOW_PRIVATE_NETWORK_TARGETS: "true"
    })
    const organization = { id: organizationId }
    await expectJson(201, "POST", `${parley.baseUrl}/admin/v1/organizations/${organization.id}/apps`, {
      token: adminToken,
      body: { name: "bench receiver", webhook_url: receiverUrl, events: ["message.created"] }
    })

    const runtime = ManagedRuntime.make(Database.clientLayer(Redacted.make(database.url), 8))
    cleanup.add("sql", () => runtime.dispose())
    const sqlRun = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, f))
    const insertOne = (id: string) =>
      sqlRun((sql) =>
        sql.unsafe(
          "INSERT INTO events (id, organization_id, type, body, created_at) VALUES ($1, $2, 'message.created', $3, now())",
          [id, organization.id, envelope(id, organization.id)]
        )
      )
    const waitAll = async (ids: ReadonlyArray<string>, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs
      while (ids.some((id) => !receivedAt.has(id))) {
        if (Date.now() > deadline)
          throw new Error(`Only ${ids.filter((id) => receivedAt.has(id)).length}/${ids.length} delivered`)
        await sleep(5)
      }
    }

    // Warmup: 500 events.
    const warm = Array.from({ length: 500 }, () => randomUUID())
    for (const id of warm) await insertOne(id)
    await waitAll(warm, 30_000)

    // 1. Throughput.
    const burst = Array.from({ length: events }, () => randomUUID())
    const cpuBefore = cpuSeconds(parley.pid) ?? 0
    const bodies = burst.map((id) => envelope(id, organization.id))
    await sqlRun((sql) =>
      sql.unsafe(
        `INSERT INTO events (id, organization_id, type, body, created_at)
         SELECT u.id, $2, 'message.created', u.body, now() FROM unnest($1::uuid[], $3::text[]) AS u(id, body)`,
        [burst, organization.id, bodies]
      )
    )
    const committed = performance.now()
    await waitAll(burst, 120_000)
    const lastReceipt = Math.max(...burst.map((id) => receivedAt.get(id)!))
    const throughputSeconds = (lastReceipt - committed) / 1000
    const deliveriesPerSecond = events / throughputSeconds
    const throughputCpuMsPerDelivery = (((cpuSeconds(parley.pid) ?? 0) - cpuBefore) * 1000) / events
    log(
      `  throughput: ${events} deliveries in ${throughputSeconds.toFixed(2)} s = ${fixed(deliveriesPerSecond, 0)}/s, server CPU ${fixed(throughputCpuMsPerDelivery, 3)} ms/delivery`
    )
    await sleep(1_000)

    // 2. Latency at a steady rate.
    const steady = Array.from({ length: events }, () => randomUUID())
    const commitAt = new Map<string, number>()
    const perTick = Math.max(1, Math.round(rate / 100))
    const start = performance.now()
    const inserts: Array<Promise<unknown>> = []
    for (let i = 0; i < steady.length; i += perTick) {
      const due = start + (i / rate) * 1000
      const wait = due - performance.now()
      if (wait > 1) await sleep(wait)
      for (const id of steady.slice(i, i + perTick)) {
        inserts.push(insertOne(id).then(() => commitAt.set(id, performance.now())))
      }
    }
    await Promise.all(inserts)
    const producedSeconds = (performance.now() - start) / 1000
    await waitAll(steady, 120_000)
    const latencies = steady.map((id) => Math.max(0, receivedAt.get(id)! - commitAt.get(id)!)).sort((a, b) => a - b)
    const p50 = percentile(latencies, 50)
    const p99 = percentile(latencies, 99)
    log(
      `  latency at ${fixed(events / producedSeconds, 0)} events/s: p50 ${fixed(p50, 1)} ms, p99 ${fixed(p99, 1)} ms, max ${fixed(latencies[latencies.length - 1], 1)} ms`
    )
    const duplicates = requests - receivedAt.size

    const goals = { deliveriesPerSecond: 1500, p50Ms: 20 }
    const met = { throughput: deliveriesPerSecond >= goals.deliveriesPerSecond, latency: p50 <= goals.p50Ms }
    const columns: ReadonlyArray<Column> = [
      { header: "measure", align: "left" },
      { header: "value" },
      { header: "goal" },
      { header: "met", align: "left" }
    ]
    const rows = [
      [`deliveries/s (burst of ${events})`, fixed(deliveriesPerSecond, 0), ">= 1500", met.throughput ? "yes" : "NO"],
      ["server CPU ms/delivery (burst)", fixed(throughputCpuMsPerDelivery, 3), "", ""],
      [`commit-to-receipt p50 ms (${rate}/s)`, fixed(p50, 1), "<= 20", met.latency ? "yes" : "NO"],
      [`commit-to-receipt p99 ms (${rate}/s)`, fixed(p99, 1), "", ""],
      ["duplicate requests", duplicates, "0", duplicates === 0 ? "yes" : "NO"]
    ]
    log("")
    log(formatTable(columns, rows))
    const env = environment()
    const json = {
      benchmark: "webhooks",
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options: { events, rate },
      throughput: {
        events,
        seconds: throughputSeconds,
        deliveriesPerSecond,
        serverCpuMsPerDelivery: throughputCpuMsPerDelivery
      },
      latency: { rate, achievedRate: events / producedSeconds, p50, p99, max: latencies[latencies.length - 1] },
      duplicates,
      goals,
      met
    }
    const markdown = [
      `# webhooks benchmark, ${startedAt.toISOString()}`,
      "",
      `One Parley process delivering message.created events to a local receiver; events committed with SQL.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}); PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}.`,
      "",
      markdownTable(columns, rows)
    ].join("\n")
    const written = writeResults("webhooks", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
  } finally {
    await cleanup.run()
  }
}
