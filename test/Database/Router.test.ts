/**
 * Single-shard requests on Citus (O11; issue 43 item 3). On a cluster, every
 * statement Parley sends while serving POST message, ingest, GET and search
 * of sessions and messages, and export pages is recorded (with its
 * parameters, through effect/sql's `Statement.CurrentTransformer`) and
 * explained on the coordinator: each must be a router query, a Citus plan of
 * one task, or touch no distributed table at all. A statement with INSERT
 * CTEs (POST message's, ingest's: one round trip on one server) is never one
 * router query on Citus: it runs as steps in order, each CTE's result kept
 * for the next ("subplans"), in one distributed transaction. There every
 * step must be one task and every task on one worker, the organization's
 * (steps that only read earlier results run on the coordinator): the
 * request is still single-shard, and the transaction commits on that
 * worker alone. (What a step sees of an earlier one differs from one
 * statement's single snapshot; the statements that read a row they also
 * change read it MATERIALIZED first: src/Messages/Repo.ts updateDelivery.)
 * The same for the claims of the background workers (webhook deliveries,
 * reply jobs, schedules, erasures, evaluations), each of one organization,
 * which run there with `FOR UPDATE SKIP LOCKED`; their discoveries of the
 * organizations with due work read every shard by design, without row locks
 * (`src/Database/Workers.ts` `makeOrganizationRotation`). On one PostgreSQL server
 * (a laptop's `npm test`, the first pass of `.ci/run`) there is nothing to
 * route and the file says so; `.ci/run`'s Citus pass runs it.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient, Statement } from "effect/sql"
import { inject } from "vitest"
import { ErasuresRepo } from "../../src/Erasures/Repo.ts"
import { EvaluationsRepo } from "../../src/Evaluations/Repo.ts"
import { RepliesRepo } from "../../src/Replies/Repo.ts"
import { Ids } from "../../src/Shared/Ids.ts"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { text } from "../support/ApiFixtures.ts"
import { insertApp } from "../support/Database.ts"
import { serversOf } from "../support/Servers.ts"
import { TestApi, TestApp } from "../support/TestApp.ts"

const servers = await serversOf(inject("serverUrl"))
const onCluster = servers.nodes !== undefined
if (!onCluster) {
  process.stderr.write(
    "[test/Database/Router.test.ts] skipped: TEST_DATABASE_URL is one PostgreSQL server, not a Citus coordinator (O11); .ci/run runs it on a cluster\n"
  )
}

/** A statement as sent: its SQL text and parameters, and the operation that sent it. */
interface Sent {
  readonly operation: string
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

const sent: Array<Sent> = []
let operation = "setup"

/** Records every statement with the operation under way (see module docs). */
const recording = Layer.succeed(Statement.CurrentTransformer, (statement) =>
  Effect.sync(() => {
    const [sql, params] = statement.compile()
    sent.push({ operation, sql, params })
    return statement
  })
)

/**
 * What a Citus plan (EXPLAIN's JSON) distributes: the task count of each
 * distributed query in it, and the workers (`port=...`) its tasks run on,
 * every node's but the coordinator's.
 */
const planTasks = (
  plan: unknown
): { readonly counts: ReadonlyArray<number>; readonly workers: ReadonlySet<string> } => {
  const counts: Array<number> = []
  const workers = new Set<string>()
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk)
    else if (node !== null && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key === "Task Count" && typeof value === "number") counts.push(value)
        else if (key === "Node" && typeof value === "string") {
          const port = /port=(\d+)/.exec(value)?.[1]
          if (port !== undefined && Number(port) !== servers.nodes?.[0]?.port) workers.add(`port=${port}`)
        } else walk(value)
      }
    }
  }
  walk(plan)
  return { counts, workers }
}

/** A parameter's value as an SQL literal (the statement's own casts give it its type). */
const literal = (value: unknown): string => {
  const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`
  const element = (item: unknown): string =>
    item === null || item === undefined ? "NULL" : `"${String(item).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`
  if (value === null || value === undefined) return "NULL"
  if (typeof value === "number" || typeof value === "bigint") return String(value)
  if (typeof value === "boolean") return value ? "TRUE" : "FALSE"
  if (value instanceof Date) return quoted(value.toISOString())
  if (value instanceof Uint8Array) return quoted(`\\x${Buffer.from(value).toString("hex")}`)
  if (Array.isArray(value)) return quoted(`{${value.map(element).join(",")}}`)
  if (typeof value === "object") return quoted(JSON.stringify(value))
  return quoted(String(value))
}

/**
 * `sql` with each `$n` replaced by its parameter as a literal: Citus cannot
 * make a distributed plan of an EXPLAIN whose parameters are bound (it plans
 * it generic, "parameters in SQL functions"), so the statement is explained
 * as it ran, with its values.
 */
const withLiterals = (sql: string, params: ReadonlyArray<unknown>): string =>
  sql.replace(/\$(\d+)/g, (_, n: string) => literal(params[Number(n) - 1]))

/** Statements EXPLAIN takes (not BEGIN, COMMIT, LISTEN, SET, ...). */
const explainable = (sql: string) => /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql)

/** The recorded `statements` whose EXPLAIN is not one task, each as `operation: tasks n,m: text`. */
const multiTask = (statements: ReadonlyArray<Sent>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const multi: Array<string> = []
    for (const statement of statements) {
      const rows = yield* sql.unsafe<{ "QUERY PLAN": unknown }>(
        `EXPLAIN (FORMAT JSON) ${withLiterals(statement.sql, statement.params)}`
      )
      const { counts, workers: nodes } = planTasks(rows[0]?.["QUERY PLAN"])
      if (counts.some((count) => count !== 1) || nodes.size > 1) {
        multi.push(
          `${statement.operation}: tasks ${counts.join(",")} on ${[...nodes].join(", ")}: ${statement.sql.slice(0, 300)}`
        )
      }
    }
    return multi
  })

describe.skipIf(!onCluster)("router queries on Citus (O11)", () => {
  // No background workers: every statement sent is the operation's own.
  layer(TestApp().pipe(Layer.provide(recording)), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect(
      "every statement of POST message, ingest, GET/search sessions and messages and export pages is one task",
      () =>
        Effect.gen(function* () {
          const api = yield* TestApi
          const org = yield* api.organization()
          const step = <A>(name: string, effect: Effect.Effect<A>) =>
            Effect.gen(function* () {
              operation = name
              const result = yield* effect
              operation = "between"
              return result
            })
          const created = yield* step(
            "POST /sessions",
            org.call("POST", "/sessions", { contact_id: "+1", contact_name: "A" })
          )
          const session = created.body.id as string
          const message = yield* step("POST message", org.call("POST", `/sessions/${session}/messages`, text("Hello")))
          assert.strictEqual(message.status, 201)
          yield* step("GET session", org.call("GET", `/sessions/${session}`))
          yield* step("POST /sessions/search", org.call("POST", "/sessions/search", {}))
          yield* step("GET message", org.call("GET", `/sessions/${session}/messages/${message.body.id}`))
          yield* step("POST messages/search", org.call("POST", `/sessions/${session}/messages/search`, {}))
          const ingested = yield* step(
            "POST /ingest",
            org.call("POST", "/ingest", { to: "channel", from: "+2", content: text("Hi").content })
          )
          assert.strictEqual(ingested.status, 200, ingested.text)
          yield* step(
            "POST /ingest again",
            org.call("POST", "/ingest", { to: "channel", from: "+2", content: text("Again").content })
          )
          yield* step("GET /data/sessions", org.call("GET", "/data/sessions?limit=1"))
          yield* step("GET /data/messages", org.call("GET", "/data/messages?limit=1"))

          const checked = sent.filter((s) => s.operation !== "setup" && s.operation !== "between" && explainable(s.sql))
          assert.isAbove(checked.length, 10)
          assert.deepStrictEqual(yield* multiTask(checked), [])
        })
    )

    // The workers' repositories over the same recorded client; no background workers run.
    layer(
      Layer.mergeAll(WebhooksRepo.layer, RepliesRepo.layer, ErasuresRepo.layer, EvaluationsRepo.layer).pipe(
        Layer.provide(Ids.layer),
        Layer.provideMerge(TestApp().pipe(Layer.provide(recording))),
        // The test's own statements are recorded too.
        Layer.provideMerge(recording)
      ),
      { excludeTestServices: true, timeout: "120 seconds" }
    )((it) => {
      it.effect(
        "the workers' claims are one task per organization; their discoveries read every shard, without locks",
        () =>
          Effect.gen(function* () {
            const api = yield* TestApi
            const sql = yield* SqlClient.SqlClient
            const webhooks = yield* WebhooksRepo
            const replies = yield* RepliesRepo
            const erasures = yield* ErasuresRepo
            const evaluations = yield* EvaluationsRepo
            const org = yield* api.organization()
            const workerId = "0193a000-0000-7000-8000-0000000000aa"
            // A due delivery of each kind (W5, W7): one app of each ordering, one event each, router INSERTs.
            yield* insertApp(org.id, "router unordered")
            yield* insertApp(org.id, "router ordered", "conversation")
            for (let i = 0; i < 2; i++) {
              yield* sql`INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
              VALUES (gen_random_uuid(), ${org.id}, 'message.created', '{}', now(), md5('router')::uuid)`
            }
            const step = <A, E>(name: string, effect: Effect.Effect<A, E>) =>
              Effect.gen(function* () {
                operation = name
                const result = yield* effect
                operation = "between"
                return result
              })
            const options = { after: "00000000-0000-0000-0000-000000000000", limit: 128, organizations: 16 }
            const found = yield* step("discover deliveries", webhooks.discover({ ...options, saturated: [] }))
            assert.include(found, org.id)
            const claimed = yield* step(
              "claim deliveries",
              webhooks.claim(org.id, {
                workerId,
                leaseMs: 60_000,
                limit: 128,
                perApp: 128,
                busyApps: [],
                busyCounts: [],
                saturated: []
              })
            )
            // The unordered delivery and the head of the ordered queue; the second of the queue waits for it (W7).
            assert.strictEqual(claimed.length, 3)
            const now = new Date()
            yield* step("discover reply jobs", replies.discoverJobs({ ...options, now }))
            yield* step(
              "claim reply jobs",
              replies.claimJobs({ organizationId: org.id, workerId, now, leaseMs: 60_000, limit: 64 })
            )
            yield* step("discover schedules", replies.discoverSchedules({ ...options, now }))
            yield* step(
              "claim schedules",
              replies.claimSchedules({ organizationId: org.id, workerId, now, leaseMs: 60_000, limit: 64 })
            )
            yield* step("discover erasures", erasures.discover(workerId, options.after, options.organizations))
            yield* step("claim erasures", erasures.claim(org.id, workerId, 60_000))
            yield* step("discover evaluations", evaluations.discover(options.after, options.organizations))
            yield* step("claim evaluations", evaluations.claim(org.id, workerId, 60_000))

            const ofStep = (name: string) => sent.filter((s) => s.operation === name && explainable(s.sql))
            const claims = [
              "claim deliveries",
              "claim reply jobs",
              "claim schedules",
              "claim erasures",
              "claim evaluations"
            ]
            for (const name of claims) assert.strictEqual(ofStep(name).length, 1, name)
            assert.deepStrictEqual(yield* multiTask(claims.flatMap(ofStep)), [])
            // The discoveries are multi-shard by design (Database/Workers.ts makeOrganizationRotation): they find
            // the organizations with due work on every shard, take no row lock (Citus refuses FOR UPDATE there), and
            // each organization found is then claimed by one of the router statements above.
            const discoveries = [
              "discover deliveries",
              "discover reply jobs",
              "discover schedules",
              "discover erasures",
              "discover evaluations"
            ]
            for (const name of discoveries) {
              const [statement] = ofStep(name)
              assert.notMatch(statement!.sql, /FOR (UPDATE|SHARE)/i, name)
            }
            assert.strictEqual((yield* multiTask(discoveries.flatMap(ofStep))).length, discoveries.length)
          })
      )
    })
  })
})
