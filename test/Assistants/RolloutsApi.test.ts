/**
 * Rollouts, runtime settings and run statistics over HTTP and PostgreSQL
 * (DECISIONS.md A12-A14; issue 17): the endpoints' responses and errors, runs
 * of the AI runtime (echo model) recording their branch and commit, and
 * statistics counting what the runs recorded.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { inRollout } from "../../src/Assistants/Rollouts.ts"
import { aiFixture, snapshotOf, waitFor } from "../Replies/support.ts"
import { A, assistantFixture, llm } from "../support/Assistants.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"

/** An AI agent's assistant with main published and `feature` published one commit ahead. */
const withFeature = Effect.gen(function* () {
  const fx = yield* aiFixture(snapshotOf([llm("start")]))
  const created = yield* fx.call("POST", "/branches", { name: "feature" })
  assert.strictEqual(created.status, 201, created.text)
  yield* fx.call("PATCH", "/branches/feature/draft/nodes/start", { name: "Friendlier start" })
  const feature = yield* fx.publish("feature", "friendlier")
  return { ...fx, feature }
})

/** The branch and commit every run of the session recorded, oldest first. */
const runsOf = (sessionId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ branch_name: string | null; commit_id: string | null }>`SELECT branch_name, commit_id
      FROM runs WHERE session_id = ${sessionId} ORDER BY started_at, id`.pipe(Effect.orDie)
  })

withWorkers()("rollouts, runtime settings and run statistics", (it) => {
  it.effect("A12: PUT, GET and DELETE of a rollout, with their errors", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      assert.deepStrictEqual(yield* fx.call("GET", "/rollout").pipe(Effect.map((r) => [r.status, r.body])), [
        404,
        { detail: "No rollout" }
      ])
      const unknown = yield* fx.call("PUT", "/rollout", { branch_name: "nope", percent: 10 })
      assert.deepStrictEqual([unknown.status, unknown.body], [404, { detail: "Branch not found" }])
      // A branch with no HEAD: main of an assistant never published.
      const fresh = yield* assistantFixture()
      const never = yield* fresh.call("PUT", "/rollout", { branch_name: "main", percent: 10 })
      assert.deepStrictEqual([never.status, never.body], [400, { detail: "Branch has no published version" }])
      for (const bad of [101, -1, 2.5, "10", null]) {
        const response = yield* fx.call("PUT", "/rollout", { branch_name: "feature", percent: bad })
        assert.strictEqual(response.status, 422, `percent ${JSON.stringify(bad)}`)
        assert.deepStrictEqual(response.body.detail[0].loc, ["body", "percent"])
      }
      const started = yield* fx.call("PUT", "/rollout", { branch_name: "feature", percent: 10 })
      assert.strictEqual(started.status, 200, started.text)
      assert.deepStrictEqual(Object.keys(started.body), [
        "assistant_id",
        "branch_name",
        "percent",
        "head_commit_id",
        "created_at",
        "updated_at"
      ])
      assert.deepStrictEqual(
        [started.body.assistant_id, started.body.branch_name, started.body.percent, started.body.head_commit_id],
        [fx.id, "feature", 10, fx.feature.id]
      )
      assert.deepStrictEqual((yield* fx.call("GET", "/rollout")).body, started.body)
      const raised = yield* fx.call("PUT", "/rollout", { branch_name: "feature", percent: 20 })
      assert.deepStrictEqual([raised.body.percent, raised.body.created_at], [20, started.body.created_at])
      assert.strictEqual((yield* fx.call("DELETE", "/rollout")).status, 204)
      assert.deepStrictEqual((yield* fx.call("DELETE", "/rollout")).body, { detail: "No rollout" })
    })
  )

  it.effect("A13: runtime settings default to none, PUT sets them, other values are 422", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      assert.deepStrictEqual((yield* fx.call("GET", "/runtime-settings")).body, { session_pinning: "none" })
      for (const bad of ["SESSION", "pinned", 1, null]) {
        const response = yield* fx.call("PUT", "/runtime-settings", { session_pinning: bad })
        assert.strictEqual(response.status, 422, `session_pinning ${JSON.stringify(bad)}`)
        assert.deepStrictEqual(response.body.detail[0].loc, ["body", "session_pinning"])
      }
      const set = yield* fx.call("PUT", "/runtime-settings", { session_pinning: "session" })
      assert.deepStrictEqual([set.status, set.body], [200, { session_pinning: "session" }])
      assert.deepStrictEqual((yield* fx.call("GET", "/runtime-settings")).body, { session_pinning: "session" })
    })
  )

  it.effect("A1: a legacy assistant's rollout, settings and statistics are 409; a foreign one 404", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const fx = yield* withFeature
      const org = fx.org
      const legacy = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
        token: ADMIN_TOKEN,
        body: { name: "Legacy", versioned: false }
      })
      const base = `${A}/assistants/${legacy.body.id}`
      for (const [method, path, body] of [
        ["GET", "/rollout", undefined],
        ["PUT", "/rollout", { branch_name: "main", percent: 5 }],
        ["DELETE", "/rollout", undefined],
        ["GET", "/runtime-settings", undefined],
        ["PUT", "/runtime-settings", { session_pinning: "session" }],
        ["GET", "/runs/stats", undefined]
      ] as const) {
        const response = yield* api.request(method, `${base}${path}`, { token: org.token, body })
        assert.deepStrictEqual([response.status, response.body], [409, { detail: "Assistant is not versioned" }], path)
        const other = yield* api.organization()
        const foreign = yield* api.request(method, `${A}/assistants/${fx.id}${path}`, {
          token: other.token,
          body
        })
        assert.deepStrictEqual([foreign.status, foreign.body], [404, { detail: "Assistant not found" }], path)
      }
    })
  )

  it.effect("A12, A14: AI runs record the branch the split gave their session and its HEAD commit", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.call("PUT", "/rollout", { branch_name: "feature", percent: 50 })
      const sessions = []
      for (let i = 0; i < 12; i++) sessions.push(yield* fx.session({ contact_id: `+1555010${i}` }))
      for (const session of sessions) {
        const reply = yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })
        assert.strictEqual(reply.status, 200, reply.text)
      }
      for (const session of sessions) {
        const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
        const expected = inRollout(session.id, 50) ? ["feature", fx.feature.id] : ["main", fx.commit.id]
        assert.deepStrictEqual([runs[0]!.branch_name, runs[0]!.commit_id], expected, session.id)
      }
    })
  )

  it.effect("A14: statistics count what the runs recorded, per commit and branch, newest commit first", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      const sql = yield* SqlClient.SqlClient
      const session = yield* fx.session()
      /** Records a run `hoursAgo` hours ago, as the runtime does. */
      const run = (commitId: string, branch: string, status: string, durationMs: number, hoursAgo: number) =>
        sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, branch_name, nodes,
            input_tokens, output_tokens, status, started_at, finished_at, duration_ms)
          VALUES (gen_random_uuid(), ${fx.org.id}, ${session.id}, 'reply', ${fx.id}, ${commitId}, ${branch}, '[]',
            ${durationMs}, 10, ${status}, now() - ${hoursAgo} * interval '1 hour',
            now() - ${hoursAgo} * interval '1 hour', ${durationMs})`
      for (const [duration, status] of [
        [100, "succeeded"],
        [400, "failed"],
        [300, "succeeded"],
        [200, "succeeded"]
      ] as const) {
        yield* run(fx.commit.id, "main", status, duration, 1)
      }
      yield* run(fx.feature.id, "feature", "succeeded", 50, 2)
      yield* run(fx.commit.id, "feature", "failed", 70, 3)
      // Outside the default range (the last 24 hours).
      yield* run(fx.commit.id, "main", "failed", 9_999, 30)

      const stats = yield* fx.call("GET", "/runs/stats")
      assert.strictEqual(stats.status, 200, stats.text)
      assert.deepStrictEqual(stats.body, {
        commits: [
          {
            commit_id: fx.feature.id,
            branch_name: "feature",
            runs: 1,
            succeeded: 1,
            failed: 0,
            duration_ms: { p50: 50, p95: 50 },
            input_tokens: 50,
            output_tokens: 10
          },
          {
            commit_id: fx.commit.id,
            branch_name: "feature",
            runs: 1,
            succeeded: 0,
            failed: 1,
            duration_ms: { p50: 70, p95: 70 },
            input_tokens: 70,
            output_tokens: 10
          },
          {
            commit_id: fx.commit.id,
            branch_name: "main",
            runs: 4,
            succeeded: 3,
            failed: 1,
            duration_ms: { p50: 200, p95: 400 },
            input_tokens: 1000,
            output_tokens: 40
          }
        ]
      })
      const hourAndHalf = new Date(Date.now() - 90 * 60_000).toISOString()
      const recent = yield* fx.call("GET", `/runs/stats?since=${encodeURIComponent(hourAndHalf)}`)
      assert.deepStrictEqual(
        recent.body.commits.map((entry: { branch_name: string; runs: number }) => [entry.branch_name, entry.runs]),
        [["main", 4]]
      )
      const older = yield* fx.call(
        "GET",
        `/runs/stats?since=${encodeURIComponent(new Date(Date.now() - 48 * 3_600_000).toISOString())}&until=${encodeURIComponent(new Date(Date.now() - 24 * 3_600_000).toISOString())}`
      )
      assert.deepStrictEqual(older.body.commits[0].duration_ms, { p50: 9_999, p95: 9_999 })
      const bad = yield* fx.call("GET", "/runs/stats?since=yesterday")
      assert.deepStrictEqual([bad.status, bad.body.detail[0].loc], [422, ["query", "since"]])
      // The earliest moment a client may send (D18): the default start is not before it (the fuzz test's find).
      const earliest = yield* fx.call("GET", "/runs/stats?until=0001-01-01T00:00:00Z")
      assert.deepStrictEqual([earliest.status, earliest.body], [200, { commits: [] }])
    })
  )

  it.effect(
    "A14: over any range, the statistics (whole hours from run_rollups) equal percentile_disc over the runs",
    () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        const sql = yield* SqlClient.SqlClient
        const session = yield* fx.session()
        // 600 runs over the last 60 hours, two commits and three branches, durations with ties; then 3 deleted.
        yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, branch_name,
          nodes, input_tokens, output_tokens, status, started_at, finished_at, duration_ms)
        SELECT gen_random_uuid(), ${fx.org.id}, ${session.id}, 'reply', ${fx.id},
          CASE WHEN i % 3 = 0 THEN ${fx.feature.id} ELSE ${fx.commit.id} END,
          CASE WHEN i % 3 = 0 THEN 'feature' WHEN i % 7 = 0 THEN NULL ELSE 'main' END, '[]', i % 50, i % 7,
          CASE WHEN i % 5 = 0 THEN 'failed' ELSE 'succeeded' END,
          now() - (i * 359) * interval '1 second', now(), (i * 7919) % 97
        FROM generate_series(1, 600) AS i`
        yield* sql`DELETE FROM runs WHERE session_id = ${session.id} AND duration_ms = 3`
        const now = Date.now()
        const hour = 3_600_000
        const ranges: Array<[number, number]> = [
          [now - 24 * hour, now],
          [now - 61 * hour, now + hour],
          [now - 30 * hour - 1234, now - 2 * hour + 5678],
          [Math.floor(now / hour) * hour - 5 * hour, Math.floor(now / hour) * hour - 2 * hour],
          [now - 90 * 60_000, now - 20 * 60_000],
          [now - hour, now - 2 * hour]
        ]
        for (const [since, until] of ranges) {
          const from = new Date(since).toISOString()
          const to = new Date(until).toISOString()
          const response = yield* fx.call(
            "GET",
            `/runs/stats?since=${encodeURIComponent(from)}&until=${encodeURIComponent(to)}`
          )
          assert.strictEqual(response.status, 200, response.text)
          const expected = yield* sql<{
            commit_id: string
            branch_name: string | null
            runs: number
            succeeded: number
            failed: number
            p50: number
            p95: number
            input_tokens: number
            output_tokens: number
          }>`SELECT commit_id, branch_name, count(*)::int AS runs,
            count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
            count(*) FILTER (WHERE status = 'failed')::int AS failed,
            percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
            percentile_disc(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95,
            sum(input_tokens)::int AS input_tokens, sum(output_tokens)::int AS output_tokens
          FROM runs WHERE assistant_id = ${fx.id} AND started_at >= ${from}::timestamptz AND started_at < ${to}::timestamptz
          GROUP BY commit_id, branch_name`
          const sorted = (entries: ReadonlyArray<any>) =>
            [...entries]
              .map((e) => ({
                commit_id: e.commit_id,
                branch_name: e.branch_name,
                runs: e.runs,
                succeeded: e.succeeded,
                failed: e.failed,
                duration_ms: e.duration_ms ?? { p50: e.p50, p95: e.p95 },
                input_tokens: e.input_tokens,
                output_tokens: e.output_tokens
              }))
              .sort((a, b) => `${a.commit_id}/${a.branch_name}`.localeCompare(`${b.commit_id}/${b.branch_name}`))
          assert.deepStrictEqual(sorted(response.body.commits), sorted(expected), `${from} .. ${to}`)
        }
      })
  )
})
