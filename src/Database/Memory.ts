/**
 * The in-memory database of the conversations domains (issue 13 item 8): the
 * tables that the rules written in TypeScript read and write, as plain maps
 * and arrays that a fast test creates, fills and inspects. The repositories'
 * in-memory layers share it (`SessionsRepo.layerTest`, `MessagesRepo.layerTest`,
 * `IngestRepo.layerTest`, and `RepliesRepo.layerTest`, whose store this
 * extends, and `RuntimeRepo.layerTest`), so a test of ingest sees the
 * contacts, conversations, sessions, messages, reply jobs and events that one
 * call wrote, and a test of the runtime the run records, as PostgreSQL would
 * hold them (the columns the rules need, not every column of the migrations).
 *
 * Transactions ({@link memoryTransaction}) are serialized by one semaphore per
 * database and roll back: a transaction that fails (or dies, or is
 * interrupted) leaves every table as it found it, and a nested one is a
 * savepoint. A statement outside a transaction ({@link memoryStatement}) is a
 * transaction of its own (autocommit). Row locks (`FOR UPDATE`, the ingest
 * advisory lock of D9) are implied by the semaphore. Times come from `Clock`,
 * so `TestClock` drives them.
 *
 * Events ({@link recordEvent}) are kept in commit order with the W3 envelope,
 * `data.object` as a JSON value, so tests can assert W1's types, order and
 * objects.
 */
import { Clock, Context, Effect, Exit, Semaphore } from "effect"
import type { JsonObject } from "../Domain/Common.ts"
import type { Content } from "../Domain/Content.ts"
import type { EventType } from "../Domain/Event.ts"
import type { DeliveryStatus, MessageRole } from "../Domain/Message.ts"
import type { MemoryJob, MemorySchedule, MemorySession, MemoryStore } from "../Replies/MemoryRepo.ts"
import type { RunRecord } from "../Runtime/Repo.ts"
import { makeIdGenerator } from "../Shared/Ids.ts"

/** An agent (admin API, O6): AI agents have an `assistant_id`, human ones a `profile_id`. */
export interface MemoryAgent {
  readonly id: string
  readonly organization_id: string
  readonly name: string
  readonly type: "ai" | "human"
  readonly assistant_id: string | null
  readonly profile_id: string | null
  readonly created_at: Date
}

/** The organization settings the conversation rules read (O6); a missing row means the defaults. */
export interface MemorySettings {
  /** D9: the agent of a new ingest session given no `agent_id`. */
  default_agent_id: string | null
  /** D11: whole seconds, 0-60 (default 3). */
  reply_debounce_seconds: number
  /** D16: whole seconds, or null for never. */
  session_idle_timeout_seconds: number | null
}

/** A contact, keyed by (organization, contact_id) (D8). */
export interface MemoryContact {
  readonly organization_id: string
  readonly contact_id: string
  name: string | null
  phone: string | null
  readonly created_at: Date
  updated_at: Date | null
}

/** A conversation of (organization, contact, channel) (D8); the channel `("", "")` is none (POST /sessions). */
export interface MemoryConversation {
  readonly id: string
  readonly organization_id: string
  readonly contact_id: string
  readonly channel_type: string
  readonly channel_to: string
  readonly created_at: Date
}

/**
 * A session row. `agent_type` is the type of `agent_id`'s agent, kept in step
 * by the sessions repository (the replies repository reads it).
 */
export interface MemorySessionRow extends MemorySession {
  readonly conversation_id: string
  readonly contact_id: string
  readonly contact_name: string | null
  metadata: JsonObject
  ending_survey_submission_id: string | null
  current_node_id: string | null
  readonly created_at: Date
  updated_at: Date | null
}

/** A message row (spec "Message"). */
export interface MemoryMessage {
  readonly id: string
  readonly organization_id: string
  readonly session_id: string
  readonly conversation_id: string
  readonly role: MessageRole
  readonly content: Content
  provider_message_id: string | null
  replied_provider_message_id: string | null
  readonly run_id: string | null
  delivery_status: DeliveryStatus
  delivery_error_code: number | null
  delivery_error_message: string | null
  delivered_at: Date | null
  readonly metadata: JsonObject
  readonly created_at: Date
  updated_at: Date | null
}

/** An ingest receipt: the first call's ids for a (conversation, provider_message_id) (D10). */
export interface MemoryReceipt {
  readonly organization_id: string
  readonly conversation_id: string
  readonly provider_message_id: string
  readonly message_id: string | null
  readonly session_id: string
  readonly created_at: Date
}

/** An outbox event with its W3 envelope: `timestamp` in Unix seconds, `data.object` the resource as JSON. */
export interface MemoryEvent {
  readonly id: string
  readonly timestamp: number
  readonly type: EventType
  readonly organization_id: string
  readonly data: { readonly object: JsonObject }
}

/** The tables; the replies tables (`sessions`, `jobs`, `schedules`) are those of `RepliesRepo.layerTest`. */
export interface MemoryDatabase extends MemoryStore {
  readonly agents: Map<string, MemoryAgent>
  /** By organization id. */
  readonly settings: Map<string, MemorySettings>
  readonly contacts: Array<MemoryContact>
  readonly conversations: Array<MemoryConversation>
  readonly sessions: Map<string, MemorySessionRow>
  readonly messages: Array<MemoryMessage>
  readonly receipts: Array<MemoryReceipt>
  readonly jobs: Array<MemoryJob>
  readonly schedules: Array<MemorySchedule>
  /** Every event written, in commit order (W1, W2). */
  readonly events: Array<MemoryEvent>
  /** The AI runtime's run records (R2), in the order written. */
  readonly runs: Array<RunRecord>
  /** One permit: the database's transactions run one at a time ({@link memoryTransaction}). */
  readonly lock: Semaphore.Semaphore
}

/** The names of the tables, for snapshots. */
const TABLES = [
  "agents",
  "settings",
  "contacts",
  "conversations",
  "sessions",
  "messages",
  "receipts",
  "jobs",
  "schedules",
  "events",
  "runs"
] as const satisfies ReadonlyArray<keyof MemoryDatabase>

/** An empty database. */
export const makeMemoryDatabase = (): MemoryDatabase => ({
  agents: new Map(),
  settings: new Map(),
  contacts: [],
  conversations: [],
  sessions: new Map(),
  messages: [],
  receipts: [],
  jobs: [],
  schedules: [],
  events: [],
  runs: [],
  lock: Semaphore.makeUnsafe(1),
  newId: makeIdGenerator()
})

/** The settings of an organization without a row (O6 defaults). */
export const defaultSettings = (): MemorySettings => ({
  default_agent_id: null,
  reply_debounce_seconds: 3,
  session_idle_timeout_seconds: null
})

/** A copy of every table (rows included), as a transaction's savepoint and for tests comparing states. */
export const snapshotTables = (db: MemoryDatabase): { readonly [K in (typeof TABLES)[number]]: MemoryDatabase[K] } =>
  structuredClone(Object.fromEntries(TABLES.map((table) => [table, db[table]]))) as never

/** Puts the tables of `snapshot` back into `db`, in place (the maps and arrays keep their identity). */
const restoreTables = (db: MemoryDatabase, snapshot: ReturnType<typeof snapshotTables>): void => {
  for (const table of TABLES) {
    const target = db[table] as Map<unknown, unknown> | Array<unknown>
    const saved = snapshot[table] as Map<unknown, unknown> | Array<unknown>
    if (target instanceof Map && saved instanceof Map) {
      target.clear()
      for (const [key, value] of saved) target.set(key, value)
    } else if (Array.isArray(target) && Array.isArray(saved)) {
      target.splice(0, target.length, ...saved)
    }
  }
}

/** The database whose transaction the running fiber is in, if any. */
const CurrentTransaction = Context.Reference<MemoryDatabase | undefined>("parley/Database/Memory/CurrentTransaction", {
  defaultValue: () => undefined
})

/** Runs `self`, putting the tables back as they were when it fails, dies or is interrupted. */
const savepoint = <A, E, R>(db: MemoryDatabase, self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const saved = snapshotTables(db)
    return Effect.onExit(self, (exit) =>
      Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => restoreTables(db, saved))
    )
  })

/**
 * Runs `self` in a transaction of `db`: one at a time per database (the
 * semaphore), rolled back when it fails; inside a transaction of the same
 * database, a savepoint (`sql.withTransaction`'s nesting).
 */
export const memoryTransaction =
  (db: MemoryDatabase) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(CurrentTransaction, (current) =>
      current === db
        ? savepoint(db, self)
        : db.lock.withPermits(1)(savepoint(db, Effect.provideService(self, CurrentTransaction, db)))
    )

/**
 * One statement on `db`: `write` runs at once with the current time (`Clock`,
 * as a Date), inside the running transaction, else in a transaction of its own
 * (autocommit).
 */
export const memoryStatement = <A>(db: MemoryDatabase, write: (now: Date) => A): Effect.Effect<A> =>
  memoryTransaction(db)(Effect.map(Clock.currentTimeMillis, (millis) => write(new Date(millis))))

/** A timestamp as the wire JSON has it (`Database/Json.ts` `isoTimestamp`): ISO 8601 UTC with microseconds. */
export const memoryTimestamp = (date: Date): string => date.toISOString().replace("Z", "000Z")

/** A UUID column's value for the text `id` (PostgreSQL reads UUIDs in either case and answers lowercase). */
export const uuidKey = (id: string): string => id.toLowerCase()

/**
 * Writes an event (the outbox's `insertEvents`, `Outbox/Outbox.ts`): type,
 * organization, the resource as `data.object` (copied), stamped `now`; `id`
 * defaults to a new one.
 */
export const recordEvent = (
  db: MemoryDatabase,
  event: {
    readonly type: EventType
    readonly organizationId: string
    readonly object: JsonObject
    readonly now: Date
    readonly id?: string | undefined
  }
): void => {
  db.events.push({
    id: event.id ?? db.newId(),
    timestamp: Math.floor(event.now.getTime() / 1000),
    type: event.type,
    organization_id: event.organizationId,
    data: { object: structuredClone(event.object) }
  })
}
