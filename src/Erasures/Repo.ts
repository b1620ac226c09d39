/**
 * SQL of the erasures domain (DECISIONS.md D22): the `erasures` table, the
 * marks a request sets on the contact's conversations and sessions, and the
 * batches of deletes its job makes (migrations/0020_erasures.ts).
 *
 * The job is leased like reply jobs (`src/Replies/Repo.ts`): claimed with
 * `FOR UPDATE SKIP LOCKED` under a lease, each batch in its own transaction
 * that first checks the lease is still this worker's and locks the erasure
 * row, then deletes and adds what it deleted to `counts`. A crashed worker's
 * erasure is claimed again once its lease expires and goes on from what is
 * left: every batch deletes what remains, so none is done twice or lost.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import { immutableIsoTimestamp, objectJson } from "../Database/Json.ts"
import { isUuid } from "../Domain/Common.ts"
import { Erasure, type ErasureCounts, type ErasureKind, erasureKinds } from "../Domain/Erasure.ts"
import { insertEvents, notifyDeliveriesIf, wroteSubscribedSql } from "../Outbox/Outbox.ts"
import { Ids } from "../Shared/Ids.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"

/** The channel erasure workers LISTEN on; a new erasure notifies it at commit. */
export const erasuresChannel = "parley_erasures"

/** Rows deleted per kind so far (a partial {@link ErasureCounts}). */
export type PartialCounts = { readonly [K in ErasureKind]?: number }

/** The counts with every kind, 0 where nothing was deleted. */
export const completeCounts = (counts: PartialCounts): ErasureCounts =>
  Object.fromEntries(erasureKinds.map((kind) => [kind, counts[kind] ?? 0])) as unknown as ErasureCounts

/** `counts` with `delta` added. */
export const addCounts = (counts: PartialCounts, delta: PartialCounts): PartialCounts =>
  Object.fromEntries(erasureKinds.map((kind) => [kind, (counts[kind] ?? 0) + (delta[kind] ?? 0)]))

/** An erasure claimed by a worker. */
export interface ClaimedErasure {
  readonly organization_id: string
  readonly id: string
  readonly contact_id: string
  readonly request_id: string | null
}

/**
 * The key a marked conversation takes instead of its contact's id (SQL text
 * over the erasure id `erasureId`, a uuid expression): longer than any contact
 * id can be (255 characters, D17), so it is never a real contact's key, and
 * unique per erasure and channel (the conversation's unique key keeps its
 * channel). Ingest and POST /sessions then find no conversation of the contact
 * and make a new one (D22).
 */
const erasedContactKey = (erasureId: string) => `'erased ' || ${erasureId}::text || ' ' || repeat('.', 256)`

/** The erasure's wire members (the {@link Erasure} schema), over the erasures row `e`. */
const erasureColumns = `e.id::text AS id, e.contact_id, e.status, ${immutableIsoTimestamp("e.requested_at")} AS requested_at,
  ${immutableIsoTimestamp("e.completed_at")} AS completed_at, CASE WHEN e.status = 'completed' THEN e.counts END AS counts`

const decodeErasure = Schema.decodeUnknownEffect(Erasure)

/**
 * Sets an erasure `completed` and writes its `contact.erased` event (W1, D22:
 * `data.object` is `{contact_id, erasure_id}` and nothing else; no
 * conversation). Parameters: $1 organization, $2 erasure, $3 counts (jsonb
 * text), $4 the event's id, $5 the trace context (jsonb text or null).
 */
const completeText = `WITH e AS (
  UPDATE erasures SET status = 'completed', completed_at = statement_timestamp(), counts = $3::jsonb,
    leased_by = NULL, lease_until = NULL
  WHERE organization_id = $1::uuid AND id = $2::uuid
  RETURNING organization_id, id, contact_id, completed_at
), ev AS (
  ${insertEvents({
    id: "$4::uuid",
    type: "'contact.erased'",
    organizationId: "e.organization_id",
    conversationId: "NULL::uuid",
    at: "e.completed_at",
    object: objectJson([
      ["contact_id", "e.contact_id"],
      ["erasure_id", "e.id::text"]
    ]),
    traceContext: "$5::jsonb",
    from: "e"
  })}
)
SELECT ${wroteSubscribedSql(["ev"], "$1::uuid")} AS subscribed`

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const { newId } = yield* Ids

  /** The first row as an {@link Erasure}, or undefined when there is none. */
  const toErasure = (rows: ReadonlyArray<unknown>) =>
    rows[0] === undefined ? Effect.succeed(undefined) : decodeErasure(rows[0])

  /** The erasure of the organization, or undefined (unknown id, another organization's). */
  const find = (organizationId: string, erasureId: string) =>
    isUuid(erasureId)
      ? sql`SELECT ${sql.literal(erasureColumns)} FROM erasures e
          WHERE e.organization_id = ${organizationId} AND e.id = ${erasureId}`.pipe(Effect.flatMap(toErasure))
      : Effect.succeed(undefined)

  /** The latest erasure of the contact still in progress, or undefined. */
  const pendingOf = (organizationId: string, contactId: string) =>
    sql`SELECT ${sql.literal(erasureColumns)} FROM erasures e
      WHERE e.organization_id = ${organizationId} AND e.contact_id = ${contactId} AND e.status = 'pending'
      ORDER BY e.requested_at DESC LIMIT 1`.pipe(Effect.flatMap(toErasure))

  /**
   * Locks the contact's row and its conversations (inside the request's
   * transaction, so concurrent DELETEs of one contact take turns) and tells
   * whether the contact exists: a contact row or a conversation not yet
   * erased.
   */
  const lockContact = (organizationId: string, contactId: string) =>
    sql<{ contacts: number; conversations: number }>`WITH c AS (
        SELECT 1 FROM contacts WHERE organization_id = ${organizationId} AND contact_id = ${contactId} FOR UPDATE
      ), v AS (
        SELECT 1 FROM conversations WHERE organization_id = ${organizationId} AND contact_id = ${contactId} FOR UPDATE
      )
      SELECT (SELECT count(*) FROM c)::int AS contacts, (SELECT count(*) FROM v)::int AS conversations`.pipe(
      Effect.map(([row]) => ({ contacts: row!.contacts, found: row!.contacts > 0 || row!.conversations > 0 }))
    )

  /**
   * Starts an erasure (D22), inside the request's transaction: inserts it
   * (`pending`, `counts.contacts` = `contacts`), marks the contact's
   * conversations (renaming their key: {@link erasedContactKey}) and sessions
   * with its id, deletes the contact row (a new contact of the same id may be
   * made at once) and notifies the workers at commit. Returns the erasure's id.
   * Marking a thousand sessions is one index scan and a thousand updates
   * (test/Erasures/Erasures.test.ts measures it).
   */
  const start = (organizationId: string, contactId: string, requestId: string | null, contacts: number) => {
    const id = newId()
    return sql`WITH e AS (
        INSERT INTO erasures (organization_id, id, contact_id, status, counts, request_id, requested_at)
        VALUES (${organizationId}, ${id}, ${contactId}, 'pending', jsonb_build_object('contacts', ${contacts}::int),
          ${requestId}, statement_timestamp())
        RETURNING id
      ), v AS (
        UPDATE conversations SET erasure_id = ${id}::uuid,
          contact_id = ${sql.literal(erasedContactKey("(SELECT id FROM e)"))}
        WHERE organization_id = ${organizationId} AND contact_id = ${contactId}
        RETURNING 1
      ), s AS (
        UPDATE sessions SET erasure_id = ${id}::uuid
        WHERE organization_id = ${organizationId} AND contact_id = ${contactId} AND erasure_id IS NULL
        RETURNING 1
      ), c AS (
        DELETE FROM contacts WHERE organization_id = ${organizationId} AND contact_id = ${contactId}
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM v)::int AS conversations, (SELECT count(*) FROM s)::int AS sessions,
        (SELECT count(*) FROM c)::int AS contacts`.pipe(
      // O11: the NOTIFY a statement of its own, which runs on the coordinator (docs/citus-notes.md (b)).
      Effect.andThen(sql`SELECT pg_notify(${erasuresChannel}, '')`),
      Effect.as(id)
    )
  }

  /**
   * Up to `organizations` ids of organizations with an erasure
   * {@link claim} may take for `workerId` (pending, its lease free, expired or
   * `workerId`'s), those after `after` first in id order, then the others
   * (O11; `Database/Workers.ts` `makeOrganizationRotation`). No row locks:
   * on Citus one multi-shard SELECT.
   */
  const discover = (workerId: string, after: string, organizations: number) =>
    sql<{ organization_id: string }>`SELECT organization_id::text AS organization_id FROM erasures
      WHERE status = 'pending'
        AND (lease_until IS NULL OR lease_until < statement_timestamp() OR leased_by = ${workerId})
      GROUP BY organization_id
      ORDER BY organization_id <= ${after}::uuid, organization_id
      LIMIT ${organizations}`.pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  /**
   * Leases the erasure of the organization `organizationId` pending longest
   * whose lease is free, expired (a crashed worker's) or already
   * `workerId`'s (after a failed batch) to `workerId` for `leaseMs`; none
   * when there is none. One organization per statement (O11): on Citus a
   * router statement, where `FOR UPDATE SKIP LOCKED` works; an erasure's
   * lease concerns its own row only, so claiming organization by
   * organization keeps it. Returns at most one erasure.
   */
  const claim = (organizationId: string, workerId: string, leaseMs: number) =>
    sql<ClaimedErasure>`UPDATE erasures e SET leased_by = ${workerId}, attempts = e.attempts + 1,
        lease_until = statement_timestamp() + ${leaseMs} * interval '1 millisecond'
      FROM (
        SELECT organization_id, id FROM erasures
        WHERE organization_id = ${organizationId} AND status = 'pending'
          AND (lease_until IS NULL OR lease_until < statement_timestamp() OR leased_by = ${workerId})
        ORDER BY requested_at LIMIT 1
        FOR UPDATE SKIP LOCKED
      ) p
      WHERE e.organization_id = ${organizationId} AND e.id = p.id
      RETURNING e.organization_id::text, e.id::text, e.contact_id, e.request_id`

  /**
   * Inside a batch's transaction: renews the lease if `workerId` still holds
   * the pending erasure, locking its row until the transaction ends, and
   * returns its counts so far; undefined when the lease was lost (expired
   * and taken by another worker) or the erasure is done.
   */
  const hold = (erasure: ClaimedErasure, workerId: string, leaseMs: number) =>
    sql<{ counts: PartialCounts }>`UPDATE erasures
      SET lease_until = statement_timestamp() + ${leaseMs} * interval '1 millisecond'
      WHERE organization_id = ${erasure.organization_id} AND id = ${erasure.id} AND leased_by = ${workerId}
        AND status = 'pending'
      RETURNING counts`.pipe(Effect.map((rows) => rows[0]?.counts))

  /** Clears the leases `workerId` holds (O5: released at shutdown for another process). */
  const release = (workerId: string) =>
    sql`UPDATE erasures SET leased_by = NULL, lease_until = NULL
      WHERE leased_by = ${workerId} AND status = 'pending'`.pipe(Effect.asVoid)

  /** Writes the counts so far (inside the batch's transaction, after {@link hold}). */
  const saveCounts = (erasure: ClaimedErasure, counts: PartialCounts) =>
    sql`UPDATE erasures SET counts = ${sql.json(counts)}
      WHERE organization_id = ${erasure.organization_id} AND id = ${erasure.id}`.pipe(Effect.asVoid)

  /** Up to `limit` ids of the erasure's sessions left. */
  const sessionBatch = (erasure: ClaimedErasure, limit: number) =>
    sql<{ id: string }>`SELECT id::text FROM sessions
      WHERE organization_id = ${erasure.organization_id} AND contact_id = ${erasure.contact_id}
        AND erasure_id = ${erasure.id}
      LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map((row) => row.id)))

  /** Deletes up to `limit` messages of `sessionIds`; returns how many. */
  const deleteMessages = (erasure: ClaimedErasure, sessionIds: ReadonlyArray<string>, limit: number) =>
    sql<{ n: number }>`WITH d AS (
        DELETE FROM messages WHERE organization_id = ${erasure.organization_id} AND id IN (
          SELECT id FROM messages WHERE session_id = ANY (${sessionIds}::uuid[])
            AND organization_id = ${erasure.organization_id}
          LIMIT ${limit})
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM d`.pipe(Effect.map((rows) => rows[0]!.n))

  /**
   * Deletes the sessions `sessionIds` (their messages gone) with their runs,
   * schedules, reply jobs and assignments; returns how many of each.
   */
  const deleteSessions = (erasure: ClaimedErasure, sessionIds: ReadonlyArray<string>) =>
    sql<Required<Pick<PartialCounts, "runs" | "schedules" | "reply_jobs" | "assignments" | "sessions">>>`WITH
      runs AS (DELETE FROM runs WHERE organization_id = ${erasure.organization_id}
        AND session_id = ANY (${sessionIds}::uuid[]) RETURNING 1),
      schedules AS (DELETE FROM session_schedules WHERE organization_id = ${erasure.organization_id}
        AND session_id = ANY (${sessionIds}::uuid[]) RETURNING 1),
      jobs AS (DELETE FROM reply_jobs WHERE organization_id = ${erasure.organization_id}
        AND session_id = ANY (${sessionIds}::uuid[]) RETURNING 1),
      assignments AS (DELETE FROM session_assignments WHERE organization_id = ${erasure.organization_id}
        AND session_id = ANY (${sessionIds}::uuid[]) RETURNING 1),
      sessions AS (
        DELETE FROM sessions WHERE id = ANY (${sessionIds}::uuid[]) AND organization_id = ${erasure.organization_id}
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM schedules)::int AS schedules,
        (SELECT count(*) FROM jobs)::int AS reply_jobs, (SELECT count(*) FROM assignments)::int AS assignments,
        (SELECT count(*) FROM sessions)::int AS sessions`.pipe(Effect.map((rows) => rows[0]!))

  /**
   * Marks the sessions of the erasure's conversations not marked yet: a
   * session made in one of them by a transaction that overlapped the request
   * (it found the conversation before the request renamed it). Returns how many.
   */
  const markStragglers = (erasure: ClaimedErasure) =>
    sql<{ n: number }>`WITH s AS (
        UPDATE sessions SET erasure_id = ${erasure.id}::uuid
        WHERE organization_id = ${erasure.organization_id} AND contact_id = ${erasure.contact_id}
          AND erasure_id IS NULL
          AND conversation_id IN (SELECT id FROM conversations
            WHERE organization_id = ${erasure.organization_id} AND erasure_id = ${erasure.id})
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM s`.pipe(Effect.map((rows) => rows[0]!.n))

  /**
   * Deletes up to `limit` events of the erasure's conversations (those that
   * carry the contact's data, W1) with their deliveries, pending ones
   * included; returns how many of each.
   */
  const deleteEvents = (erasure: ClaimedErasure, limit: number) =>
    sql<Required<Pick<PartialCounts, "events" | "deliveries">>>`WITH e AS (
        SELECT ev.id FROM events ev
        WHERE ev.conversation_id IN (SELECT id FROM conversations
            WHERE organization_id = ${erasure.organization_id} AND erasure_id = ${erasure.id})
          AND ev.organization_id = ${erasure.organization_id}
        LIMIT ${limit}
      ), d AS (
        DELETE FROM deliveries WHERE event_id IN (SELECT id FROM e) AND organization_id = ${erasure.organization_id}
        RETURNING 1
      ), x AS (
        DELETE FROM events WHERE id IN (SELECT id FROM e) AND organization_id = ${erasure.organization_id}
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM x)::int AS events, (SELECT count(*) FROM d)::int AS deliveries`.pipe(
      Effect.map((rows) => rows[0]!)
    )

  /** Deletes up to `limit` ingest receipts of the erasure's conversations (D10); returns how many. */
  const deleteReceipts = (erasure: ClaimedErasure, limit: number) =>
    sql<{ n: number }>`WITH d AS (
        DELETE FROM ingest_receipts WHERE organization_id = ${erasure.organization_id}
          AND (conversation_id, provider_message_id) IN (
          SELECT conversation_id, provider_message_id FROM ingest_receipts
          WHERE organization_id = ${erasure.organization_id} AND conversation_id IN (SELECT id FROM conversations
              WHERE organization_id = ${erasure.organization_id} AND erasure_id = ${erasure.id})
          LIMIT ${limit})
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM d`.pipe(Effect.map((rows) => rows[0]!.n))

  /**
   * Ends the erasure (D22): deletes its conversations, sets it `completed`
   * with `completed_at` and `counts` (those conversations added), and writes
   * one `contact.erased` event whose `data.object` is `{contact_id,
   * erasure_id}` (W1, W2: in the same transaction). Returns the final counts.
   */
  const complete = Effect.fnUntraced(function* (erasure: ClaimedErasure, counts: PartialCounts) {
    const [deleted] = yield* sql<{ n: number }>`WITH d AS (
        DELETE FROM conversations WHERE organization_id = ${erasure.organization_id} AND erasure_id = ${erasure.id}
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM d`
    const final = completeCounts(addCounts(counts, { conversations: deleted!.n }))
    const [written] = yield* sql.unsafe<{ subscribed: boolean }>(completeText, [
      erasure.organization_id,
      erasure.id,
      JSON.stringify(final),
      newId(),
      yield* currentTraceContext
    ])
    yield* notifyDeliveriesIf(sql, written?.subscribed === true, erasure.organization_id)
    return final
  })

  return {
    find,
    pendingOf,
    lockContact,
    start,
    discover,
    claim,
    release,
    hold,
    saveCounts,
    sessionBatch,
    deleteMessages,
    deleteSessions,
    markStragglers,
    deleteEvents,
    deleteReceipts,
    complete,
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect)
  }
})

/** The erasures repository. */
export class ErasuresRepo extends Context.Service<ErasuresRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Erasures/ErasuresRepo"
) {
  /** Over PostgreSQL. Requires `PgClient` and `Ids`. */
  static readonly layer = Layer.effect(ErasuresRepo, makeRepo)
}
