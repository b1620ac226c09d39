/**
 * The rules of unified ingest (conversations.md "Unified ingest", "Session
 * status"; DECISIONS.md D6, D7, D9-D11, D17, W1, W2; issue 13 item 8, issue 37
 * item 1): the `Ingest` service with `it.effect` over the production services
 * on the file's database (test/support/RulesDatabase.ts: the ingest
 * repository's SQL, the sessions and replies services, one set of tables).
 * Reply jobs are due by the application's clock (`TestClock`). Each test has
 * an organization of its own; "writes nothing" compares every table before
 * and after. The HTTP suite (Ingest.test.ts) checks the same through the API.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { isUuid, MAX_METADATA_BYTES } from "../../src/Domain/Common.ts"
import type { IngestPayload } from "../../src/Ingest/Api.ts"
import { Ingest } from "../../src/Ingest/Ingest.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import {
  addAgent,
  eventLog,
  eventsOf,
  eventTypes,
  objectOf,
  onDatabase,
  organization,
  rowsOf,
  setSettings,
  snapshotTables
} from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const text = (value: string) => ({ type: "text", text: value })

/** POST /ingest for the test's organization from `f` to `t` unless the body says otherwise. */
type Call = (body: Partial<IngestPayload>) => ReturnType<Ingest["Service"]["ingest"]>

/** Runs `f` with the ingest service for a new organization (its id the second argument). */
const withIngest = <A, E, R>(f: (ingest: Call, organizationId: string) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const service = yield* Ingest
    const organizationId = yield* organization()
    return yield* f((body) => service.ingest(organizationId, { to: "t", from: "f", ...body }), organizationId)
  })

/** The stored session `id` (`SqlClient` required). */
const sessionIn = (id: string | null) =>
  Effect.map(rowsOf("sessions", "id", id), ([session]) => {
    if (session === undefined) throw new Error(`no session ${id}`)
    return session
  })

/** The reply jobs of a session: [due time in ms, triggers] (R1) (`SqlClient` required). */
const jobsOf = (sessionId: string | null) =>
  Effect.map(rowsOf("reply_jobs", "session_id", sessionId), (jobs) =>
    jobs.map((job) => [(job.due_at as Date).getTime(), job.triggers])
  )

onDatabase()("Ingest on PostgreSQL", (it) => {
  it.effect(
    "D9: continue creates the conversation and a session for the first message, then reuses the open session; without content it still ensures an open session and inserts nothing",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const first = yield* ingest({ content: text("one") })
          assert.deepStrictEqual(Object.keys(first), [
            "conversation_id",
            "session_id",
            "message_id",
            "created_conversation",
            "created_session"
          ])
          assert.deepStrictEqual([first.created_conversation, first.created_session], [true, true])
          assert.isTrue(isUuid(first.message_id ?? ""))
          // D8, D9: the conversation of (organization, from, channel_type whatsapp, to); the contact is `from`.
          assert.deepStrictEqual(
            (yield* rowsOf("conversations", "organization_id", ORG)).map((row) => [
              row.id,
              row.contact_id,
              row.channel_type,
              row.channel_to
            ]),
            [[first.conversation_id, "f", "whatsapp", "t"]]
          )
          assert.deepStrictEqual(yield* eventTypes(ORG), ["conversation.created", "session.created", "message.created"])
          const second = yield* ingest({ session: "continue", content: text("two") })
          assert.deepStrictEqual(
            { ...second, message_id: null },
            { ...first, message_id: null, created_conversation: false, created_session: false }
          )
          assert.deepStrictEqual(
            (yield* rowsOf("messages", "organization_id", ORG)).map(
              (message): Array<unknown> => [message.session_id, message.content]
            ),
            [
              [first.session_id, text("one")],
              [first.session_id, text("two")]
            ]
          )
          const before = yield* snapshotTables
          const bare = yield* ingest({})
          assert.deepStrictEqual(bare, {
            ...first,
            message_id: null,
            created_conversation: false,
            created_session: false
          })
          assert.deepStrictEqual(yield* snapshotTables, before)
          // A pair with no open session gets one without a message (D9).
          const ensured = yield* ingest({ from: "g" })
          assert.deepStrictEqual(
            [ensured.created_conversation, ensured.created_session, ensured.message_id],
            [true, true, null]
          )
          assert.strictEqual((yield* sessionIn(ensured.session_id)).status, "open")
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(4), ["conversation.created", "session.created"])
        })
      )
  )

  it.effect(
    "D9, W1: new closes the open session (session.closed with action ingest, never session.finished) and opens another, with or without content",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const fresh = yield* ingest({ session: "new", content: text("hi") })
          assert.deepStrictEqual([fresh.created_conversation, fresh.created_session], [true, true])
          assert.deepStrictEqual(yield* eventTypes(ORG), ["conversation.created", "session.created", "message.created"])
          const renewed = yield* ingest({ session: "new", content: text("again") })
          assert.strictEqual(renewed.conversation_id, fresh.conversation_id)
          assert.notStrictEqual(renewed.session_id, fresh.session_id)
          assert.deepStrictEqual([renewed.created_conversation, renewed.created_session], [false, true])
          assert.strictEqual((yield* sessionIn(fresh.session_id)).status, "closed")
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(3), [
            ["session.closed", "ingest"],
            ["session.created", "-"],
            ["message.created", "-"]
          ])
          const events = yield* eventsOf(ORG)
          assert.deepStrictEqual([objectOf(events[3]).id, objectOf(events[3]).status], [fresh.session_id, "closed"])
          assert.strictEqual(objectOf(events[5]).session_id, renewed.session_id)
          const bare = yield* ingest({ session: "new" })
          assert.deepStrictEqual([bare.created_session, bare.message_id], [true, null])
          assert.strictEqual((yield* sessionIn(renewed.session_id)).status, "closed")
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(6), [
            ["session.closed", "ingest"],
            ["session.created", "-"]
          ])
        })
      )
  )

  it.effect(
    "D9, W1: close stores the message first, then closes (action ingest); with content and no open session it opens, stores and closes; with neither it returns session_id null",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const first = yield* ingest({ content: text("hi") })
          const closed = yield* ingest({ session: "close", content: text("bye") })
          assert.deepStrictEqual(
            { ...closed, message_id: null },
            { ...first, message_id: null, created_conversation: false, created_session: false }
          )
          assert.strictEqual((yield* rowsOf("messages", "organization_id", ORG)).at(-1)?.id, closed.message_id)
          assert.strictEqual((yield* sessionIn(first.session_id)).status, "closed")
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(3), [
            ["message.created", "-"],
            ["session.closed", "ingest"]
          ])
          // Without content: closes the open session only.
          const open = yield* ingest({ from: "g" })
          const closedBare = yield* ingest({ from: "g", session: "close" })
          assert.deepStrictEqual(closedBare, {
            ...open,
            message_id: null,
            created_conversation: false,
            created_session: false
          })
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(-1), [["session.closed", "ingest"]])
          // With content and no open session: a new session holds the message and is closed.
          const count = (yield* eventsOf(ORG)).length
          const only = yield* ingest({ from: "h", session: "close", content: text("only") })
          assert.deepStrictEqual([only.created_conversation, only.created_session], [true, true])
          assert.strictEqual((yield* sessionIn(only.session_id)).status, "closed")
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(count), [
            "conversation.created",
            "session.created",
            "message.created",
            "session.closed"
          ])
          // With neither: no session (D9), and only the conversation is written.
          const nothing = yield* ingest({ from: "k", session: "close" })
          assert.deepStrictEqual(
            [nothing.session_id, nothing.message_id, nothing.created_conversation, nothing.created_session],
            [null, null, true, false]
          )
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(count + 4), ["conversation.created"])
          const before = yield* snapshotTables
          const again = yield* ingest({ from: "k", session: "close" })
          assert.deepStrictEqual(again, { ...nothing, created_conversation: false })
          assert.deepStrictEqual(yield* snapshotTables, before)
        })
      )
  )

  it.effect(
    "D9, D7, W1: a new session without agent_id gets the organization's default agent, carried by session.created with a thread (no session.transferred); agent_id or null overrides it",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const bot = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          yield* setSettings(ORG, { default_agent_id: bot })
          const first = yield* ingest({ content: text("hi") })
          const session = yield* sessionIn(first.session_id)
          assert.strictEqual(session.agent_id, bot)
          assert.isTrue(session.thread_id !== null && isUuid(session.thread_id))
          assert.deepStrictEqual(yield* eventTypes(ORG), ["conversation.created", "session.created", "message.created"])
          assert.strictEqual(objectOf((yield* eventsOf(ORG))[1]).agent.id, bot)
          // The default applies to new sessions only, not to the open session of continue.
          yield* ingest({ agent_id: human })
          assert.strictEqual((yield* sessionIn(first.session_id)).agent_id, human)
          yield* ingest({ content: text("still human") })
          assert.strictEqual((yield* sessionIn(first.session_id)).agent_id, human)
          const renewed = yield* ingest({ session: "new" })
          assert.strictEqual((yield* sessionIn(renewed.session_id)).agent_id, bot)
          const explicit = yield* ingest({ from: "b", agent_id: human, content: text("hi") })
          assert.deepStrictEqual(
            [(yield* sessionIn(explicit.session_id)).agent_id, (yield* sessionIn(explicit.session_id)).thread_id],
            [human, null]
          )
          const none = yield* ingest({ from: "c", agent_id: null, content: text("hi") })
          assert.strictEqual((yield* sessionIn(none.session_id)).agent_id, null)
          assert.notInclude((yield* eventTypes(ORG)).slice(0, 3), "session.transferred")
          assert.deepStrictEqual(
            (yield* eventsOf(ORG))
              .filter((event) => event.type === "session.created")
              .map((event) => objectOf(event).agent?.id ?? null),
            [bot, bot, human, null]
          )
        })
      )
  )

  it.effect(
    "D6, D7, W1: agent_id on the open session: another agent emits session.transferred (a thread when it first gets an AI agent, kept after), the same agent nothing, null removes, omitted keeps; an agent not of the organization is AgentNotFound and writes nothing",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          const foreign = (yield* addAgent(yield* organization(), "ai")).id
          const first = yield* ingest({ content: text("hi") })
          assert.isNull((yield* sessionIn(first.session_id)).thread_id)
          const assigned = yield* ingest({ agent_id: ai })
          assert.deepStrictEqual(assigned, {
            ...first,
            message_id: null,
            created_conversation: false,
            created_session: false
          })
          const thread = (yield* sessionIn(first.session_id)).thread_id
          assert.isTrue(thread !== null && isUuid(thread))
          yield* ingest({ agent_id: ai.toUpperCase(), content: text("same agent") })
          yield* ingest({ content: text("omitted keeps") })
          assert.strictEqual((yield* sessionIn(first.session_id)).agent_id, ai)
          yield* ingest({ agent_id: human })
          yield* ingest({ agent_id: null })
          const after = yield* sessionIn(first.session_id)
          assert.deepStrictEqual([after.agent_id, after.thread_id], [null, thread])
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(3), [
            "session.transferred",
            "message.created",
            "message.created",
            "session.transferred",
            "session.transferred"
          ])
          const events = yield* eventsOf(ORG)
          assert.deepStrictEqual(
            events.filter((event) => event.type === "session.transferred").map((event) => objectOf(event).agent),
            [{ ...objectOf(events[3]).agent, id: ai }, { ...objectOf(events[6]).agent, id: human }, null]
          )
          const before = yield* snapshotTables
          for (const agent_id of [foreign, newId(), "not-an-id"]) {
            for (const body of [
              { agent_id, content: text("hi") },
              { agent_id },
              { agent_id, session: "new" as const },
              { from: "new-pair", agent_id, content: text("hi") }
            ]) {
              const refused = yield* Effect.flip(ingest(body))
              assert.strictEqual(refused._tag, "AgentNotFound", JSON.stringify(body))
            }
          }
          assert.deepStrictEqual(yield* snapshotTables, before)
        })
      )
  )

  it.effect(
    "D10: a repeated provider_message_id returns the first call's ids with created_* false and writes nothing: no message, event, reply, session, agent, metadata or contact change",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          const body = { content: text("once"), provider_message_id: "wamid.1", agent_id: ai }
          const first = yield* ingest(body)
          assert.deepStrictEqual([first.created_conversation, first.created_session], [true, true])
          const duplicate = { ...first, created_conversation: false, created_session: false }
          const before = yield* snapshotTables
          assert.deepStrictEqual(yield* ingest({ content: text("twice"), provider_message_id: "wamid.1" }), duplicate)
          assert.deepStrictEqual(
            yield* ingest({
              ...body,
              session: "new",
              agent_id: human,
              metadata: { k: 1 },
              contact: { name: "Eve" }
            }),
            duplicate
          )
          assert.deepStrictEqual(yield* ingest({ ...body, session: "close" }), duplicate)
          assert.deepStrictEqual(yield* snapshotTables, before)
          // The plain-message path (a message to the open session) responds to repeats the same way.
          const appended = yield* ingest({ content: text("second"), provider_message_id: "wamid.2" })
          assert.isFalse(appended.created_session)
          const afterAppend = yield* snapshotTables
          assert.deepStrictEqual(yield* ingest({ content: text("second"), provider_message_id: "wamid.2" }), appended)
          assert.deepStrictEqual(yield* snapshotTables, afterAppend)
          // Even after its session was replaced, a repeat returns the first ids and changes nothing.
          yield* ingest({ session: "new" })
          const afterNew = yield* snapshotTables
          assert.deepStrictEqual(yield* ingest(body), duplicate)
          assert.deepStrictEqual(yield* snapshotTables, afterNew)
          // The id is the conversation's: another pair stores its own message.
          const elsewhere = yield* ingest({ ...body, from: "g" })
          assert.isTrue(elsewhere.created_conversation)
          assert.notStrictEqual(elsewhere.message_id, first.message_id)
          // Without content a provider_message_id claims nothing.
          const control = yield* ingest({ from: "h", provider_message_id: "wamid.ctl" })
          const withContent = yield* ingest({ from: "h", provider_message_id: "wamid.ctl", content: text("x") })
          assert.isNull(control.message_id)
          assert.isTrue(isUuid(withContent.message_id ?? ""))
        })
      )
  )

  it.effect(
    "D11, R1: a user message in a session whose agent is AI triggers a reply due after reply_debounce_seconds (trailing); assistant messages, human or no agent, control calls and close trigger none, and close drops the pending job",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          yield* setSettings(ORG, { reply_debounce_seconds: 7 })
          const user = yield* ingest({ from: "u", agent_id: ai, content: text("help") })
          assert.deepStrictEqual(yield* jobsOf(user.session_id), [[7_000, 1]])
          // The plain-message path triggers too; the debounce is trailing (one job, moved).
          yield* TestClock.adjust("2 seconds")
          yield* ingest({ from: "u", content: text("more") })
          assert.deepStrictEqual(yield* jobsOf(user.session_id), [[9_000, 2]])
          const assistant = yield* ingest({ from: "a", agent_id: ai, role: "assistant", content: text("hello") })
          const withHuman = yield* ingest({ from: "h", agent_id: human, content: text("help") })
          const noAgent = yield* ingest({ from: "n", content: text("help") })
          yield* ingest({ from: "a" })
          yield* ingest({ from: "a", agent_id: ai, metadata: { k: 1 } })
          for (const result of [assistant, withHuman, noAgent])
            assert.deepStrictEqual(yield* jobsOf(result.session_id), [])
          // A session transferred to the AI agent by the call answers its message; so does a new session's default agent.
          const transferred = yield* ingest({ from: "n", agent_id: ai, content: text("now?") })
          assert.deepStrictEqual(yield* jobsOf(transferred.session_id), [[9_000, 1]])
          yield* setSettings(ORG, { default_agent_id: ai })
          const renewed = yield* ingest({ from: "d", session: "new", content: text("hi") })
          assert.deepStrictEqual(yield* jobsOf(renewed.session_id), [[9_000, 1]])
          // close stores the message without a reply, and drops the session's pending job.
          yield* ingest({ from: "u", session: "close", content: text("bye") })
          assert.deepStrictEqual(yield* jobsOf(user.session_id), [])
          const closedAtOnce = yield* ingest({ from: "z", agent_id: ai, session: "close", content: text("bye") })
          assert.deepStrictEqual(yield* jobsOf(closedAtOnce.session_id), [])
        })
      )
  )

  it.effect(
    "D17: metadata over 16 KiB after the patch fails at body.metadata and writes nothing: no contact, receipt, conversation, close or message",
    () =>
      withIngest((ingest) =>
        Effect.gen(function* () {
          const first = yield* ingest({ metadata: { blob: "y".repeat(10_000) } })
          const before = yield* snapshotTables
          const tooBig = [
            {
              metadata: { more: "z".repeat(10_000) },
              content: text("hi"),
              contact: { name: "Eve" },
              provider_message_id: "wamid.9"
            },
            // new closes the open session before the new one's metadata is refused: the close is undone too.
            { metadata: { blob: "x".repeat(MAX_METADATA_BYTES) }, session: "new" as const, content: text("hi") },
            // A new pair: its conversation, contact and receipt are undone.
            {
              from: "g",
              metadata: { blob: "x".repeat(MAX_METADATA_BYTES) },
              content: text("hi"),
              contact: { name: "Eve" },
              provider_message_id: "wamid.9"
            }
          ]
          for (const body of tooBig) {
            const refused = yield* Effect.flip(ingest(body))
            assert.deepStrictEqual(
              refused._tag === "ValidationFailed" ? refused.detail.map((issue) => issue.loc) : refused,
              [["body", "metadata"]]
            )
          }
          assert.deepStrictEqual(yield* snapshotTables, before)
          assert.strictEqual((yield* sessionIn(first.session_id)).status, "open")
          // The limit is on the result: exactly 16 KiB as JSON is accepted, one byte more is not.
          const exact = "x".repeat(MAX_METADATA_BYTES - JSON.stringify({ blob: "" }).length)
          assert.isTrue((yield* ingest({ from: "e", metadata: { blob: exact } })).created_session)
          assert.strictEqual(
            (yield* Effect.flip(ingest({ from: "e2", metadata: { blob: `${exact}x` } })))._tag,
            "ValidationFailed"
          )
          // A patch that removes as much as it adds fits; the refused call's provider_message_id was never claimed.
          yield* ingest({ metadata: { blob: null, more: "z".repeat(10_000) } })
          assert.deepStrictEqual((yield* sessionIn(first.session_id)).metadata, { more: "z".repeat(10_000) })
          const retried = yield* ingest({ content: text("hi"), provider_message_id: "wamid.9" })
          assert.strictEqual((yield* rowsOf("messages", "id", retried.message_id)).length, 1)
        })
      )
  )

  it.effect(
    "W1: one call's events come in the order conversation.created, session.closed, session.created, session.transferred, message.created, session.closed; a metadata patch emits none",
    () =>
      withIngest((ingest, ORG) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          const first = yield* ingest({ content: text("hi") })
          // new with an agent: the closed session, then the new one carrying the agent, then the message.
          let count = (yield* eventsOf(ORG)).length
          const renewed = yield* ingest({ session: "new", agent_id: ai, content: text("hi") })
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(count), [
            ["session.closed", "ingest"],
            ["session.created", "-"],
            ["message.created", "-"]
          ])
          let events = yield* eventsOf(ORG)
          assert.deepStrictEqual(
            events.slice(count).map((event) => objectOf(event).id),
            [first.session_id, renewed.session_id, renewed.message_id]
          )
          assert.strictEqual(objectOf(events[count + 1]).agent.id, ai)
          // continue with an agent change, a metadata patch and a message: the transfer (patched metadata), the message.
          count = events.length
          yield* ingest({ agent_id: human, metadata: { a: 1 }, content: text("hi") })
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(count), ["session.transferred", "message.created"])
          events = yield* eventsOf(ORG)
          assert.deepStrictEqual(
            [objectOf(events[count]).agent.id, objectOf(events[count]).metadata],
            [human, { a: 1 }]
          )
          count = events.length
          yield* ingest({ metadata: { a: 2 } })
          assert.strictEqual((yield* eventsOf(ORG)).length, count)
          // close with an agent change and a message: transfer, message, then the close.
          yield* ingest({ session: "close", agent_id: ai, content: text("bye") })
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(count), [
            ["session.transferred", "-"],
            ["message.created", "-"],
            ["session.closed", "ingest"]
          ])
          // The close's object is the session the transfer left, closed, stamped by the close's own statement
          // (updated_at is statement_timestamp(): later than the transfer's, in the same transaction).
          events = yield* eventsOf(ORG)
          const closedObject = objectOf(events.at(-1))
          const transferredObject = objectOf(events.at(-3))
          assert.deepStrictEqual(closedObject, {
            ...transferredObject,
            status: "closed",
            updated_at: closedObject.updated_at,
            action: "ingest"
          })
          assert.isTrue(closedObject.updated_at > transferredObject.updated_at, closedObject.updated_at)
        })
      )
  )
})
