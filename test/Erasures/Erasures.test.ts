/**
 * Erasure of a contact (DECISIONS.md D22, issue 40 item 2), one test per
 * sentence: the 202 and what is unreadable from it on, the job deleting every
 * kind of row (driven here batch by batch through `Erasures`, no workers), a
 * crash in the middle resumed, another organization's contact of the same id
 * untouched, pending deliveries never leased, `contact.erased` once with only
 * its two members, the counts, the 404s and a DELETE twice.
 */
import { assert } from "@effect/vitest"
import { Effect, Logger, References } from "effect"
import { SqlClient } from "effect/sql"
import { Erasures } from "../../src/Erasures/Erasures.ts"
import { Retention } from "../../src/Retention/Retention.ts"
import { claimStatement } from "../../src/Webhooks/Repo.ts"
import { ADMIN_TOKEN, TestApi, type TestOrganization, withApp } from "../support/TestApp.ts"
import { createApp } from "../support/Webhooks.ts"

const text = (value: string) => ({ type: "text", text: value })

const message = (org: TestOrganization, sessionId: string, value = "my address is 1 Main St") =>
  org.call("POST", `/sessions/${sessionId}/messages`, { role: "user", content: text(value) }).pipe(
    Effect.map((response) => {
      assert.strictEqual(response.status, 201, response.text)
      return response.body.id as string
    })
  )

const erase = (org: TestOrganization, contactId: string) =>
  org.call("DELETE", `/contacts/${encodeURIComponent(contactId)}`)

/** Runs a claimed erasure's job to its end as worker `workerId`; returns how many batches it took. */
const runJob = (workerId: string) =>
  Effect.gen(function* () {
    const erasures = yield* Erasures
    let batches = 0
    for (;;) {
      const claimed = yield* erasures.claim(workerId, 60_000)
      if (claimed === undefined) return batches
      for (;;) {
        const step = yield* erasures.advance(claimed, workerId, 60_000)
        batches++
        if (step._tag !== "more") break
      }
    }
  })

/** Leases the organization's due deliveries as a worker would (W5, O11); returns the event ids leased. */
const claimDeliveries = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* claimStatement.run<{ event_id: string }>(sql, {
      organizationId,
      workerId: "0193a000-0000-7000-8000-000000000001",
      leaseMs: 60_000,
      limit: 1000,
      perApp: 1000,
      busyApps: [],
      busyCounts: [],
      saturated: []
    })
    return new Set(rows.map((row) => row.event_id))
  })

withApp({ allowPrivateNetworkTargets: true })("erasure of a contact (D22)", (it) => {
  it.effect("deletes every kind of row of the contact and nothing else; reads stop at the 202", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const other = yield* api.organization()
      const contact = "+15550100"
      yield* createApp(api, org, {
        webhook_url: "http://127.0.0.1:9/hook",
        events: ["session.created", "message.created", "conversation.created", "session.closed", "contact.erased"]
      })

      // The contact: an open and a closed session (POST /sessions), a channel conversation (ingest), messages.
      const open = yield* org.session({ contact_id: contact, contact_name: "Ada" })
      const closed = yield* org.session({ contact_id: contact, status: "closed" })
      const ingested = yield* org.call("POST", "/ingest", {
        from: contact,
        to: "+15550199",
        provider_message_id: "wamid.1",
        content: text("hello from WhatsApp")
      })
      assert.strictEqual(ingested.status, 200, ingested.text)
      const messageIds = [yield* message(org, open.id), yield* message(org, open.id, "second")]
      const schedule = yield* org.call("POST", `/sessions/${open.id}/schedule`, {
        scheduled_for: "2099-01-01T00:00:00Z",
        config: { type: "message", message: text("reminder") }
      })
      assert.strictEqual(schedule.status, 200, schedule.text)
      // A run, a reply job and an assignment, as the runtime and rollouts write them.
      const assistant = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
        token: ADMIN_TOKEN,
        body: { name: "bot" }
      })
      yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, status, started_at, finished_at, duration_ms)
        VALUES (parley_uuid_v7(), ${org.id}, ${open.id}, 'reply', 'succeeded', now(), now(), 1)`
      yield* sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, created_at)
        VALUES (parley_uuid_v7(), ${org.id}, ${open.id}, 'pending', now() + interval '1 day', now())`
      yield* sql`INSERT INTO session_assignments (organization_id, session_id, assistant_id, branch_name, commit_id,
          created_at, updated_at)
        VALUES (${org.id}, ${open.id}, ${assistant.body.id}, 'main', 'c1', now(), now())`

      // Another contact of the organization, and the same contact id in another organization.
      const keep = yield* org.session({ contact_id: "+15550111" })
      const keepMessage = yield* message(org, keep.id, "keep me")
      const foreign = yield* other.session({ contact_id: contact })
      const foreignMessage = yield* message(other, foreign.id, "not yours")

      const sessionIds = [open.id, closed.id, ingested.body.session_id as string]
      const conversationIds = [...new Set([open.conversation_id, ingested.body.conversation_id as string])]
      const [before] = yield* sql<{ messages: number; events: number; deliveries: number }>`SELECT
        (SELECT count(*) FROM messages WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS messages,
        (SELECT count(*) FROM events WHERE conversation_id = ANY (${conversationIds}::uuid[]))::int AS events,
        (SELECT count(*) FROM deliveries d JOIN events e ON e.organization_id = d.organization_id AND e.id = d.event_id
          WHERE e.conversation_id = ANY (${conversationIds}::uuid[]))::int AS deliveries`
      assert.isAbove(before!.deliveries, 0)

      // D22: the 202 with the erasure, pending.
      const response = yield* erase(org, contact)
      assert.strictEqual(response.status, 202, response.text)
      assert.deepStrictEqual(Object.keys(response.body), [
        "id",
        "contact_id",
        "status",
        "requested_at",
        "completed_at",
        "counts"
      ])
      assert.strictEqual(response.body.contact_id, contact)
      assert.strictEqual(response.body.status, "pending")
      const erasureId: string = response.body.id

      // From that moment nothing of the contact is readable.
      for (const id of sessionIds) {
        for (const [method, path, body] of [
          ["GET", `/sessions/${id}`, undefined],
          ["PATCH", `/sessions/${id}`, { fields: { metadata: { a: 1 } } }],
          ["POST", `/sessions/${id}/finish`, {}],
          ["POST", `/sessions/${id}/transfer`, {}],
          ["POST", `/sessions/${id}/messages/search`, { session_id: id }],
          ["POST", `/sessions/${id}/messages`, { role: "user", content: text("more") }],
          ["GET", `/sessions/${id}/messages/${messageIds[0]}`, undefined],
          ["GET", `/sessions/${id}/schedules`, undefined],
          ["POST", `/sessions/${id}/reply`, {}]
        ] as const) {
          const read = yield* org.call(method, path, body)
          assert.strictEqual(read.status, 404, `${method} ${path}: ${read.text}`)
          assert.deepStrictEqual(read.body, { detail: "Session not found" })
        }
      }
      const search = yield* org.call("POST", "/sessions/search", { contact_id: contact })
      assert.deepStrictEqual(search.body, [])
      const exported = yield* org.call("GET", "/data/sessions?limit=3000")
      const exportedIds = (exported.body as Array<{ id: string }>).map((s) => s.id)
      assert.include(exportedIds, keep.id)
      for (const id of sessionIds) assert.notInclude(exportedIds, id)
      const batch = yield* org.call(
        "GET",
        `/data/sessions/batch?${sessionIds.map((id) => `session_ids=${id}`).join("&")}`
      )
      assert.deepStrictEqual(batch.body, [])
      const exportedMessages = (
        (yield* org.call("GET", "/data/messages?limit=3000")).body as Array<{ id: string; session_id: string }>
      ).map((m) => m.id)
      assert.include(exportedMessages, keepMessage)
      for (const id of messageIds) assert.notInclude(exportedMessages, id)

      // From the 202 on no delivery of the contact's events is leased (so none is sent); others' still are.
      const leased = yield* claimDeliveries(org.id)
      const contactEvents = yield* sql<{ id: string }>`SELECT id::text FROM events
        WHERE conversation_id = ANY (${conversationIds}::uuid[])`
      for (const event of contactEvents) assert.isFalse(leased.has(event.id), `delivery of ${event.id} leased`)
      const [keepEvent] = yield* sql<{ id: string }>`SELECT id::text FROM events
        WHERE organization_id = ${org.id} AND type = 'message.created' AND body LIKE ${`%${keepMessage}%`}`
      assert.isTrue(leased.has(keepEvent!.id), "the other contact's delivery is leased")

      // Ingest from the same `from` makes a new contact, which the erasure does not touch.
      const again = yield* org.call("POST", "/ingest", {
        from: contact,
        to: "+15550199",
        provider_message_id: "wamid.1",
        content: text("hello again")
      })
      assert.strictEqual(again.status, 200, again.text)
      assert.isTrue(again.body.created_conversation)
      assert.notInclude(conversationIds, again.body.conversation_id)
      assert.isNotNull(again.body.message_id, "the old receipt does not deduplicate the new contact's message")

      // The job, then the erasure is completed with its counts.
      yield* runJob("0193a000-0000-7000-8000-0000000000a1")
      const done = yield* org.call("GET", `/erasures/${erasureId}`)
      assert.strictEqual(done.status, 200, done.text)
      assert.strictEqual(done.body.status, "completed")
      assert.match(done.body.completed_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
      assert.deepStrictEqual(done.body.counts, {
        contacts: 1,
        conversations: conversationIds.length,
        sessions: 3,
        messages: before!.messages,
        runs: 1,
        schedules: 1,
        reply_jobs: 1,
        assignments: 1,
        ingest_receipts: 1,
        events: before!.events,
        deliveries: before!.deliveries
      })

      // Nothing of the contact is left, in any table.
      const [left] = yield* sql<Record<string, number>>`SELECT
        (SELECT count(*) FROM contacts WHERE organization_id = ${org.id} AND contact_id = ${contact}
          AND created_at < ${response.body.requested_at}::timestamptz)::int AS contacts,
        (SELECT count(*) FROM conversations WHERE id = ANY (${conversationIds}::uuid[]))::int AS conversations,
        (SELECT count(*) FROM sessions WHERE id = ANY (${sessionIds}::uuid[]))::int AS sessions,
        (SELECT count(*) FROM messages WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS messages,
        (SELECT count(*) FROM runs WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS runs,
        (SELECT count(*) FROM session_schedules WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS schedules,
        (SELECT count(*) FROM reply_jobs WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS reply_jobs,
        (SELECT count(*) FROM session_assignments WHERE session_id = ANY (${sessionIds}::uuid[]))::int AS assignments,
        (SELECT count(*) FROM ingest_receipts WHERE conversation_id = ANY (${conversationIds}::uuid[]))::int
          AS ingest_receipts,
        (SELECT count(*) FROM events WHERE conversation_id = ANY (${conversationIds}::uuid[]))::int AS events,
        (SELECT count(*) FROM deliveries WHERE event_id = ANY (${contactEvents.map((e) => e.id)}::uuid[]))::int
          AS deliveries,
        (SELECT count(*) FROM events WHERE organization_id = ${org.id} AND body LIKE '%1 Main St%')::int AS copies`
      assert.deepStrictEqual(left, {
        contacts: 0,
        conversations: 0,
        sessions: 0,
        messages: 0,
        runs: 0,
        schedules: 0,
        reply_jobs: 0,
        assignments: 0,
        ingest_receipts: 0,
        events: 0,
        deliveries: 0,
        copies: 0
      })

      // The new contact, the other contact and the other organization's contact of the same id are untouched.
      assert.strictEqual((yield* org.call("GET", `/sessions/${again.body.session_id}`)).status, 200)
      assert.strictEqual((yield* org.call("GET", `/sessions/${keep.id}/messages/${keepMessage}`)).status, 200)
      const foreignRead = yield* other.call("GET", `/sessions/${foreign.id}/messages/${foreignMessage}`)
      assert.strictEqual(foreignRead.status, 200)
      assert.strictEqual(foreignRead.body.content.text, "not yours")
      const [foreignContact] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM contacts
        WHERE organization_id = ${other.id} AND contact_id = ${contact}`
      assert.strictEqual(foreignContact!.n, 1)

      // One contact.erased (W1) with data.object {contact_id, erasure_id} and nothing else, fanned out.
      const erased = (yield* api.events(org.id)).filter((event) => event.type === "contact.erased")
      assert.strictEqual(erased.length, 1)
      assert.deepStrictEqual(erased[0].data, { object: { contact_id: contact, erasure_id: erasureId } })
      const [fanned] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries
        WHERE event_id = ${erased[0].id}::uuid`
      assert.strictEqual(fanned!.n, 1)
      assert.strictEqual((yield* api.events(other.id)).filter((e) => e.type === "contact.erased").length, 0)

      // Running the job again changes nothing: no second event.
      yield* runJob("0193a000-0000-7000-8000-0000000000a2")
      assert.strictEqual((yield* api.events(org.id)).filter((event) => event.type === "contact.erased").length, 1)
    })
  )

  it.effect("DELETE twice answers the same erasure; erased and unknown contacts 404; erasures per organization", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      yield* org.session({ contact_id: "twice" })
      const first = yield* erase(org, "twice")
      const second = yield* erase(org, "twice")
      assert.strictEqual(first.status, 202)
      assert.strictEqual(second.status, 202)
      assert.deepStrictEqual(second.body, first.body)

      assert.deepStrictEqual((yield* other.call("GET", `/erasures/${first.body.id}`)).body, {
        detail: "Erasure not found"
      })
      assert.strictEqual((yield* other.call("GET", `/erasures/${first.body.id}`)).status, 404)
      assert.strictEqual((yield* other.call("DELETE", "/contacts/twice")).status, 404)
      for (const id of ["0193a000-0000-7000-8000-00000000ffff", "not-a-uuid"]) {
        const unknown = yield* org.call("GET", `/erasures/${id}`)
        assert.strictEqual(unknown.status, 404)
        assert.deepStrictEqual(unknown.body, { detail: "Erasure not found" })
      }
      const nobody = yield* erase(org, "nobody")
      assert.strictEqual(nobody.status, 404)
      assert.deepStrictEqual(nobody.body, { detail: "Contact not found" })

      yield* runJob("0193a000-0000-7000-8000-0000000000b1")
      const after = yield* erase(org, "twice")
      assert.strictEqual(after.status, 404)
      assert.deepStrictEqual(after.body, { detail: "Contact not found" })
      assert.strictEqual((yield* org.call("GET", `/erasures/${first.body.id}`)).body.status, "completed")
    })
  )

  it.effect("a crash in the middle is resumed when the lease expires; counts are neither lost nor doubled", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const erasures = yield* Erasures
      const org = yield* api.organization()
      const sessions = [yield* org.session({ contact_id: "crash" }), yield* org.session({ contact_id: "crash" })]
      for (const session of sessions) yield* message(org, session.id)
      const response = yield* erase(org, "crash")
      const id: string = response.body.id

      // Worker A claims the erasure, does one batch, and dies.
      const workerA = "0193a000-0000-7000-8000-0000000000c1"
      let claimed = yield* erasures.claim(workerA, 60_000)
      while (claimed !== undefined && claimed.id !== id) claimed = yield* erasures.claim(workerA, 60_000)
      assert.isDefined(claimed)
      assert.strictEqual((yield* erasures.advance(claimed!, workerA, 60_000))._tag, "more")
      const [half] = yield* sql<{ counts: Record<string, number>; status: string }>`SELECT counts, status
        FROM erasures WHERE id = ${id}`
      assert.strictEqual(half!.status, "pending")
      assert.isAbove(half!.counts.events ?? 0, 0, "half done: its events are gone")
      assert.strictEqual(half!.counts.sessions ?? 0, 0, "half done: its sessions are left")

      // While A's lease holds, no one else takes it; once it expires, worker B resumes and completes it.
      const workerB = "0193a000-0000-7000-8000-0000000000c2"
      const early = yield* erasures.claim(workerB, 60_000)
      assert.notStrictEqual(early?.id, id)
      yield* sql`UPDATE erasures SET lease_until = now() - interval '1 second' WHERE id = ${id}`
      yield* runJob(workerB)
      assert.strictEqual((yield* erasures.advance(claimed!, workerA, 60_000))._tag, "lost")
      const done = (yield* org.call("GET", `/erasures/${id}`)).body
      assert.strictEqual(done.status, "completed")
      assert.strictEqual(done.counts.sessions, 2)
      assert.strictEqual(done.counts.messages, 2)
      assert.strictEqual(done.counts.events, half!.counts.events! + 0)
      assert.strictEqual(done.counts.conversations, 1)
      const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM sessions
        WHERE id = ANY (${sessions.map((s) => s.id)}::uuid[])`
      assert.strictEqual(left!.n, 0)
    })
  )

  it.effect("the erasure is logged once, with its request's id and the counts, never content or the contact's id", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session({ contact_id: "+15550160", contact_name: "Loggable Name" })
      yield* message(org, session.id, "a very private sentence")
      const response = yield* api.request("DELETE", "/conversations/v2/api/v1/contacts/%2B15550160", {
        token: org.token,
        headers: { "x-request-id": "erasure-request-1" }
      })
      assert.strictEqual(response.status, 202)
      const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
      const capture = Logger.make(({ message, fiber }) => {
        lines.push({ message, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } })
      })
      yield* runJob("0193a000-0000-7000-8000-0000000000d1").pipe(Effect.provide(Logger.layer([capture])))
      const mine = lines.filter((line) => line.annotations.erasure_id === response.body.id)
      assert.strictEqual(mine.length, 1)
      assert.deepStrictEqual(mine[0]!.message, ["Contact erased"])
      assert.strictEqual(mine[0]!.annotations.request_id, "erasure-request-1")
      assert.strictEqual(mine[0]!.annotations["erased.sessions"], 1)
      assert.strictEqual(mine[0]!.annotations["erased.messages"], 1)
      const text = JSON.stringify(mine)
      for (const secret of ["+15550160", "Loggable Name", "a very private sentence"]) assert.notInclude(text, secret)
    })
  )

  it.effect("retention (D21) leaves the sessions of an erasure in progress to it; the erasure still counts them", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const settings = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
        token: ADMIN_TOKEN,
        body: { message_retention_days: 1 }
      })
      assert.strictEqual(settings.status, 200, settings.text)
      const session = yield* org.session({ contact_id: "old", status: "closed" })
      yield* sql`UPDATE sessions SET updated_at = now() - interval '3 days' WHERE id = ${session.id}`
      const response = yield* erase(org, "old")
      yield* (yield* Retention).sweep
      const [left] = yield* sql<{ sessions: number; conversations: number }>`SELECT
        (SELECT count(*) FROM sessions WHERE id = ${session.id})::int AS sessions,
        (SELECT count(*) FROM conversations WHERE id = ${session.conversation_id})::int AS conversations`
      assert.deepStrictEqual(left, { sessions: 1, conversations: 1 })
      yield* runJob("0193a000-0000-7000-8000-0000000000e1")
      const done = (yield* org.call("GET", `/erasures/${response.body.id}`)).body
      assert.strictEqual(done.counts.sessions, 1)
      assert.strictEqual(done.counts.conversations, 1)
    })
  )

  it.effect("marking a contact of 1,000 sessions stays fast (the DELETE's own transaction)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const first = yield* org.session({ contact_id: "many" })
      yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
        SELECT parley_uuid_v7(), ${org.id}, ${first.conversation_id}, 'many', 'closed', now() - n * interval '1 second'
        FROM generate_series(1, 999) n`
      const started = performance.now()
      const response = yield* erase(org, "many")
      const elapsedMs = performance.now() - started
      assert.strictEqual(response.status, 202)
      const [marked] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM sessions
        WHERE organization_id = ${org.id} AND erasure_id = ${response.body.id}`
      assert.strictEqual(marked!.n, 1000)
      // Measured at 25-31 ms for the whole request on the development machine (docs/behaviour.md); the bound leaves room for CI.
      assert.isBelow(elapsedMs, 2_000)
    })
  )
})
