/**
 * Retention (DECISIONS.md D21, issue 40 item 1): the `Retention` service's
 * sweep over the production services on the file's database
 * (test/support/RulesDatabase.ts), a test per sentence of D21. Rows are
 * written now by the services (ingest, finish) and by SQL where no service
 * writes them in a test (runs, schedules, assignments, delivery outcomes);
 * time is moved with `TestClock` (the sweep reads `Clock`), so "closed more
 * than N days ago" is now + N days and more. A sweep walks every organization
 * of the file's database: each test asserts on rows of its own organizations.
 */
import { assert } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Logger, Metric, Redacted, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Database from "../../src/Database/Database.ts"
import { Export } from "../../src/Export/Export.ts"
import { Ingest } from "../../src/Ingest/Ingest.ts"
import { Retention } from "../../src/Retention/Retention.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { insertApp, sessionLockWaits, TestDatabaseUrl } from "../support/Database.ts"
import { onDatabase, organization, setSettings } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const DAY_MS = 86_400_000

/** Moves the application's clock to `days` days after the real now (rows are stamped with the database's now). */
const daysLater = (days: number) => TestClock.setTime(Date.now() + days * DAY_MS)

const text = (value: string) => ({ type: "text" as const, text: value })

/** How many rows of `table` match `where` (SQL over the table's columns) for the organization. */
const count = (table: string, organizationId: string, where = "true") =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(table)}
      WHERE organization_id = ${organizationId} AND ${sql.literal(where)}`
    return rows[0]!.n
  }).pipe(Effect.orDie)

/** Rows of every table retention deletes from, for the organization (assignments by its sessions). */
const tableCounts = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const counts: Record<string, number> = {}
    for (const table of [
      "contacts",
      "conversations",
      "sessions",
      "messages",
      "runs",
      "session_schedules",
      "reply_jobs",
      "ingest_receipts",
      "events",
      "deliveries"
    ]) {
      counts[table] = yield* count(table, organizationId)
    }
    const assignments = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM session_assignments a
      JOIN assistants s ON s.organization_id = a.organization_id AND s.id = a.assistant_id WHERE s.organization_id = ${organizationId}`
    counts.session_assignments = assignments[0]!.n
    return counts
  }).pipe(Effect.orDie)

/**
 * A session of the contact `from` through ingest with `messages` messages
 * (each with a receipt), closed by the last one when `close`; returns its ids.
 */
const conversationOf = (organizationId: string, from: string, messages: number, close: boolean) =>
  Effect.gen(function* () {
    const ingest = yield* Ingest
    let result: { conversation_id: string; session_id: string | null } | undefined
    for (let i = 0; i < messages; i++) {
      result = yield* ingest.ingest(organizationId, {
        to: "shop",
        from,
        content: text(`message ${i}`),
        provider_message_id: `${from}-${newId()}`,
        ...(close && i === messages - 1 ? { session: "close" as const } : {})
      })
    }
    return { conversationId: result!.conversation_id, sessionId: result!.session_id! }
  })

/** A run, a done schedule and an assignment of the session (what the replies worker and A12 write). */
const runsOf = (organizationId: string, sessionId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const assistantId = newId()
    yield* sql`INSERT INTO assistants (id, organization_id, name, versioned, created_at)
      VALUES (${assistantId}, ${organizationId}, 'Bot', true, now())`
    yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, status, started_at, finished_at, duration_ms)
      VALUES (${newId()}, ${organizationId}, ${sessionId}, 'reply', 'succeeded', now(), now(), 12)`
    yield* sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, created_at)
      VALUES (${newId()}, ${organizationId}, ${sessionId}, now(), '{}', 'done', now())`
    yield* sql`INSERT INTO session_assignments (organization_id, session_id, assistant_id, branch_name, commit_id,
        created_at, updated_at)
      VALUES (${organizationId}, ${sessionId}, ${assistantId}, 'main', 'c1', now(), now())`
  }).pipe(Effect.orDie)

onDatabase()("Retention on PostgreSQL (D21)", (it) => {
  it.effect(
    "a session closed more than message_retention_days ago is deleted with everything of it; an open session never; the conversation and contact go with their last session",
    () =>
      Effect.gen(function* () {
        const retention = yield* Retention
        const org = yield* organization("Retention sessions")
        yield* setSettings(org, { message_retention_days: 90, event_retention_days: null })
        // Ada: a closed session with a run, a schedule and an assignment, then an open one in the same conversation.
        const adaClosed = yield* conversationOf(org, "ada", 3, true)
        yield* runsOf(org, adaClosed.sessionId)
        const adaOpen = yield* conversationOf(org, "ada", 2, false)
        assert.strictEqual(adaOpen.conversationId, adaClosed.conversationId)
        // Bob: one closed session, his only one.
        const bob = yield* conversationOf(org, "bob", 2, true)
        // Carol: an open session only, untouched whatever its age (her session was never closed).
        const carol = yield* conversationOf(org, "carol", 1, false)
        const before = yield* tableCounts(org)

        // 89 days later: nothing is old enough.
        yield* daysLater(89)
        yield* retention.sweep
        assert.deepStrictEqual(yield* tableCounts(org), before)

        // 91 days later: the closed sessions go with everything of them.
        yield* daysLater(91)
        yield* retention.sweep
        const sessions = yield* count("sessions", org)
        assert.strictEqual(sessions, 2)
        assert.strictEqual(yield* count("sessions", org, `id = '${adaOpen.sessionId}' AND status = 'open'`), 1)
        assert.strictEqual(yield* count("sessions", org, `id = '${carol.sessionId}' AND status = 'open'`), 1)
        for (const closed of [adaClosed.sessionId, bob.sessionId]) {
          for (const table of ["messages", "runs", "session_schedules", "reply_jobs", "ingest_receipts"]) {
            assert.strictEqual(yield* count(table, org, `session_id = '${closed}'`), 0, `${table} of ${closed}`)
          }
        }
        const after = yield* tableCounts(org)
        assert.deepStrictEqual(
          [after.messages, after.ingest_receipts, after.runs, after.session_schedules, after.session_assignments],
          [3, 3, 0, 0, 0]
        )
        // Ada keeps her conversation and contact (an open session is left), Bob's go with his last session.
        assert.deepStrictEqual([after.conversations, after.contacts], [2, 2])
        assert.strictEqual(yield* count("conversations", org, `id = '${bob.conversationId}'`), 0)
        assert.strictEqual(yield* count("contacts", org, `contact_id = 'bob'`), 0)
        // Retention writes no event (D21): the events are those of before.
        assert.strictEqual(after.events, before.events)
        // Bob writing again makes a new contact, conversation and session.
        const back = yield* conversationOf(org, "bob", 1, false)
        assert.notStrictEqual(back.conversationId, bob.conversationId)
        assert.strictEqual(yield* count("contacts", org, `contact_id = 'bob'`), 1)
      })
  )

  it.effect(
    "the conversation goes with its last session even when two sweepers delete its sessions at once",
    () =>
      Effect.gen(function* () {
        const retention = yield* Retention
        const org = yield* organization("Retention two sweepers")
        yield* setSettings(org, { message_retention_days: 1, event_retention_days: null })
        // 250 closed sessions of one contact in one conversation: more than two batches each.
        // Each ingest closes its session (session: "close"), so the next opens another in the same conversation.
        const first = yield* conversationOf(org, "dan", 1, true)
        for (let i = 0; i < 249; i++) yield* conversationOf(org, "dan", 1, true)
        assert.strictEqual(yield* count("sessions", org, "status = 'closed'"), 250)
        assert.strictEqual(yield* count("conversations", org), 1)
        yield* daysLater(2)
        yield* Effect.all([retention.sweep, retention.sweep], { concurrency: 2 })
        const after = yield* tableCounts(org)
        assert.deepStrictEqual([after.sessions, after.messages, after.conversations, after.contacts], [0, 0, 0, 0])
        assert.strictEqual(yield* count("conversations", org, `id = '${first.conversationId}'`), 0)
      }),
    // 250 ingests: 15 s on a Citus cluster alone, past 60 s beside a whole suite's other files (.ci/run, O11).
    180_000
  )

  it.effect("a session with more messages than one batch deletes goes over several batches (D21: small batches)", () =>
    Effect.gen(function* () {
      const retention = yield* Retention
      const sql = yield* SqlClient.SqlClient
      const org = yield* organization("Retention long session")
      yield* setSettings(org, { message_retention_days: 1, event_retention_days: null })
      const long = yield* conversationOf(org, "ivy", 1, true)
      // 25,000 more messages: three batches of at most 10,000 (ROWS_PER_BATCH) each.
      yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
        SELECT gen_random_uuid(), ${org}, ${long.sessionId}, ${long.conversationId}, 'user', '{"type":"text","text":"x"}',
          now() FROM generate_series(1, 25000)`
      yield* daysLater(2)
      const deleted = yield* retention.sweep
      assert.isAtLeast(deleted.messages ?? 0, 25_001)
      const after = yield* tableCounts(org)
      assert.deepStrictEqual([after.sessions, after.messages, after.conversations, after.contacts], [0, 0, 0, 0])
    })
  )

  it.effect(
    "events older than event_retention_days go with their deliveries, except while a delivery of theirs is pending",
    () =>
      Effect.gen(function* () {
        const retention = yield* Retention
        const sql = yield* SqlClient.SqlClient
        const org = yield* organization("Retention events")
        yield* setSettings(org, { message_retention_days: null, event_retention_days: 30 })
        yield* Effect.orDie(insertApp(org, "first"))
        yield* Effect.orDie(insertApp(org, "second"))
        // One conversation: conversation.created, session.created and three message.created events, each
        // message.created with a delivery to each of the two apps.
        yield* conversationOf(org, "erin", 3, false)
        const created = yield* sql<{ id: string }>`SELECT id::text AS id FROM events
          WHERE organization_id = ${org} AND type = 'message.created' ORDER BY created_at, id`
        assert.strictEqual(created.length, 3)
        const events = yield* count("events", org)
        assert.strictEqual(yield* count("deliveries", org), 6)
        // The first message.created is delivered to both apps, the second to one (the other still pending),
        // the third failed for good at one and succeeded at the other.
        const [delivered, waiting, failed] = created.map((row) => row.id)
        yield* sql`UPDATE deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL,
            attempt_log = ARRAY[ROW(1, 200, NULL, 5, now())::delivery_attempt]
          WHERE event_id IN (${delivered}, ${failed})`
        yield* sql`UPDATE deliveries SET status = 'failed', attempts = 8, next_attempt_at = NULL
          WHERE id = (SELECT id FROM deliveries WHERE event_id = ${failed} LIMIT 1)`
        yield* sql`UPDATE deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL
          WHERE id = (SELECT id FROM deliveries WHERE event_id = ${waiting} LIMIT 1)`

        yield* daysLater(29)
        yield* retention.sweep
        assert.strictEqual(yield* count("events", org), events)

        yield* daysLater(31)
        yield* retention.sweep
        // Every event goes but the one with a pending delivery, which keeps both of its deliveries.
        assert.strictEqual(yield* count("events", org), 1)
        assert.strictEqual(yield* count("events", org, `id = '${waiting}'`), 1)
        assert.strictEqual(yield* count("deliveries", org), 2)
        assert.strictEqual(yield* count("deliveries", org, `event_id = '${waiting}'`), 2)
        // Sessions are kept (message_retention_days null): only events went.
        assert.strictEqual(yield* count("messages", org), 3)

        // Once its last delivery is done, the event goes at the next sweep.
        yield* sql`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL WHERE event_id = ${waiting}
          AND status = 'pending'`
        yield* retention.sweep
        assert.deepStrictEqual([yield* count("events", org), yield* count("deliveries", org)], [0, 0])
      })
  )

  it.effect(
    "an organization with retention null keeps everything; one without settings keeps sessions and events 30 days",
    () =>
      Effect.gen(function* () {
        const retention = yield* Retention
        const sessions = yield* Sessions
        const forever = yield* organization("Retention forever")
        yield* setSettings(forever, { message_retention_days: null, event_retention_days: null })
        const defaults = yield* organization("Retention defaults")
        // The same contact_id in a third organization that lets sessions go after a day.
        const strict = yield* organization("Retention strict")
        yield* setSettings(strict, { message_retention_days: 1, event_retention_days: 1 })
        for (const org of [forever, defaults, strict]) {
          const one = yield* conversationOf(org, "frank", 2, false)
          yield* sessions.finish(org, one.sessionId, undefined)
        }
        const keptForever = yield* tableCounts(forever)
        const keptDefaults = yield* tableCounts(defaults)

        yield* daysLater(40)
        yield* retention.sweep
        assert.deepStrictEqual(yield* tableCounts(forever), keptForever)
        // No settings stored: sessions kept forever, events after 30 days (D21's defaults).
        assert.deepStrictEqual(yield* tableCounts(defaults), { ...keptDefaults, events: 0 })
        const gone = yield* tableCounts(strict)
        assert.deepStrictEqual([gone.sessions, gone.messages, gone.contacts, gone.events], [0, 0, 0, 0])

        yield* daysLater(100_000)
        yield* retention.sweep
        assert.deepStrictEqual(yield* tableCounts(forever), keptForever)
      })
  )

  it.effect("export (D14) stops seeing the sessions and messages retention deleted", () =>
    Effect.gen(function* () {
      const retention = yield* Retention
      const exports = yield* Export
      const sessions = yield* Sessions
      const org = yield* organization("Retention export")
      yield* setSettings(org, { message_retention_days: 7 })
      const old = yield* conversationOf(org, "gina", 2, false)
      yield* sessions.finish(org, old.sessionId, undefined)
      const current = yield* conversationOf(org, "gina", 1, false)
      const page = (kind: "sessions" | "messages") =>
        Effect.flatMap(exports[kind](org, { sort_by: "created_at", limit: 100 }), Stream.runCollect).pipe(
          Effect.map((rows) => rows.map((row) => row.id))
        )
      assert.strictEqual((yield* page("sessions")).length, 2)
      assert.strictEqual((yield* page("messages")).length, 3)
      yield* daysLater(8)
      yield* retention.sweep
      assert.deepStrictEqual(yield* page("sessions"), [current.sessionId])
      assert.strictEqual((yield* page("messages")).length, 1)
    })
  )

  it.effect(
    "a sweep adds what it deleted to parley.retention.deleted by table and logs one line with the counts; a sweep that deleted nothing logs none",
    () =>
      Effect.gen(function* () {
        const retention = yield* Retention
        const sessions = yield* Sessions
        // Whatever earlier tests left deletable at this time goes first.
        yield* daysLater(200_000)
        yield* retention.sweep
        const org = yield* organization("Retention metric")
        yield* setSettings(org, { message_retention_days: 1, event_retention_days: 1 })
        const one = yield* conversationOf(org, "hal", 2, false)
        yield* sessions.finish(org, one.sessionId, undefined)
        const events = yield* count("events", org)
        const counter = (table: string) =>
          Effect.map(Metric.snapshot, (snapshots) => {
            const found = snapshots.find(
              (snapshot) => snapshot.id === "parley.retention.deleted" && snapshot.attributes?.table === table
            )
            return found?.type === "Counter" ? Number(found.state.count) : 0
          })
        const tables = ["messages", "ingest_receipts", "sessions", "conversations", "contacts", "events"]
        const before = yield* Effect.forEach(tables, counter)
        const lines: Array<{ message: unknown; level: string }> = []
        const capture = Logger.layer([
          Logger.make((options) => {
            lines.push({ message: options.message, level: options.logLevel })
          })
        ])
        const deleted = yield* retention.sweep.pipe(Effect.provide(capture))
        const expected = { messages: 2, ingest_receipts: 2, sessions: 1, conversations: 1, contacts: 1, events }
        assert.deepStrictEqual(deleted, expected)
        const after = yield* Effect.forEach(tables, counter)
        assert.deepStrictEqual(
          after.map((n, i) => n - before[i]!),
          tables.map((table) => expected[table as keyof typeof expected])
        )
        assert.deepStrictEqual(lines, [{ message: ["Retention sweep deleted rows", expected], level: "Info" }])
        lines.length = 0
        assert.deepStrictEqual(yield* retention.sweep.pipe(Effect.provide(capture)), {})
        assert.deepStrictEqual(lines, [])
      })
  )

  it.effect("the sweeper warns once when the server runs without autovacuum, and says nothing when it runs", () =>
    Effect.gen(function* () {
      const retention = yield* Retention
      const sql = yield* SqlClient.SqlClient
      const setting = yield* sql<{ on: boolean }>`SELECT current_setting('autovacuum') = 'on' AS on`
      const lines: Array<{ message: unknown; level: string }> = []
      const capture = Logger.layer([
        Logger.make((options) => {
          lines.push({ message: options.message, level: options.logLevel })
        })
      ])
      yield* retention.warnWithoutAutovacuum.pipe(Effect.provide(capture))
      assert.deepStrictEqual(
        lines.map((line) => line.level),
        setting[0]!.on ? [] : ["Warn"]
      )
      if (!setting[0]!.on) assert.match(String((lines[0]!.message as Array<unknown>)[0]), /^autovacuum is off/)
    })
  )

  it.effect(
    "POST /sessions and ingest racing a sweep that deletes the contact's last conversation make a new one, never a 500 (D21)",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const sessions = yield* Sessions
          const ingest = yield* Ingest
          const org = yield* organization("Retention race")
          const closed = yield* sessions.create(org, { contact_id: "rae", contact_name: "Rae" })
          yield* sessions.finish(org, closed.id, undefined)
          const ingested = yield* conversationOf(org, "ray", 1, true)
          const conversationIdOf = (sessionId: string) =>
            Effect.map(
              sql<{ id: string }>`SELECT conversation_id::text AS id FROM sessions WHERE id = ${sessionId}`,
              (rows) => rows[0]!.id
            )
          const writes = [
            {
              contactId: "rae",
              old: closed.conversation_id,
              write: Effect.flatMap(sessions.create(org, { contact_id: "rae", contact_name: "Rae" }), (session) =>
                conversationIdOf(session.id)
              )
            },
            {
              contactId: "ray",
              old: ingested.conversationId,
              write: Effect.map(
                ingest.ingest(org, { to: "shop", from: "ray", content: text("back"), provider_message_id: "ray-back" }),
                (result) => result.conversation_id
              )
            }
          ]
          // The sweep's deletes and the polls run on connections of their own: the services' pool is left to
          // the writes (its LISTEN connections and the blocked write would otherwise leave none for the polls).
          const side = Context.get(
            yield* Layer.build(Database.clientLayer(Redacted.make(yield* TestDatabaseUrl), 2)),
            SqlClient.SqlClient
          )
          for (const { contactId, old, write } of writes) {
            // The sweep's deletes of the contact's last session (retention's order: the contact locked first),
            // held uncommitted while the write starts and waits on the rows they deleted.
            const deleted = yield* Deferred.make<void>()
            const commit = yield* Deferred.make<void>()
            const sweep = yield* Effect.forkChild(
              side.withTransaction(
                Effect.gen(function* () {
                  yield* side`SELECT 1 FROM contacts WHERE organization_id = ${org} AND contact_id = ${contactId} FOR UPDATE`
                  yield* side`DELETE FROM messages WHERE organization_id = ${org} AND conversation_id = ${old}`
                  yield* side`DELETE FROM sessions WHERE organization_id = ${org} AND conversation_id = ${old}`
                  yield* side`DELETE FROM conversations WHERE organization_id = ${org} AND id = ${old}`
                  yield* side`DELETE FROM contacts WHERE organization_id = ${org} AND contact_id = ${contactId}`
                  yield* Deferred.succeed(deleted, undefined)
                  yield* Deferred.await(commit)
                })
              )
            )
            yield* Deferred.await(deleted)
            const writing = yield* Effect.forkChild(write)
            for (let polls = 0; ; polls++) {
              if ((yield* sessionLockWaits(side)) > 0) break
              assert.isBelow(polls, 10_000, "the write never waited for the sweep's locks")
            }
            yield* Deferred.succeed(commit, undefined)
            yield* Fiber.join(sweep)
            const conversationId = yield* Fiber.join(writing)
            assert.notStrictEqual(conversationId, old)
            assert.strictEqual(yield* count("conversations", org, `id = '${old}'`), 0)
            assert.strictEqual(yield* count("contacts", org, `contact_id = '${contactId}'`), 1)
          }
        })
      )
  )
})
