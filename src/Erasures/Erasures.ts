/**
 * The erasures service (DECISIONS.md D22, GDPR art. 17): erasing a contact
 * and the job that deletes everything of it.
 *
 * The request (`erase`) does in one transaction what makes the contact
 * unreadable at once: it marks the contact's conversations (renaming their
 * key, so ingest from the same `from` makes a new contact) and its sessions
 * with the erasure's id, and deletes the contact row. Every read of a session
 * leaves marked ones out (they 404; search and export skip them) and the
 * delivery claim skips the events of marked conversations, so from the 202 on
 * none of them is sent (`src/Webhooks/Repo.ts` `claimStatement`).
 *
 * The job (`advance`, run by `Worker.ts`) deletes in batches, one transaction
 * each, under a lease, always starting from the first kind that has rows
 * left: the events of the conversations with their deliveries (first, so the
 * deliveries the claim skips do not linger; again after the sessions, for an
 * event a racing transaction wrote), the sessions with their messages, runs,
 * schedules, reply jobs and assignments, sessions a racing transaction made
 * in the conversations (marked, then deleted), the ingest receipts; then the
 * conversations go, and the erasure completes with its counts and one
 * `contact.erased` event (W1).
 */
import { Context, Effect, Layer, References } from "effect"
import { DISCOVERED_ORGANIZATIONS, makeOrganizationRotation } from "../Database/Workers.ts"
import type { Erasure, ErasureCounts } from "../Domain/Erasure.ts"
import { ContactNotFound, ErasureNotFound } from "./Errors.ts"
import { addCounts, type ClaimedErasure, ErasuresRepo, type PartialCounts } from "./Repo.ts"

/** Sessions deleted per batch. */
export const SESSIONS_PER_BATCH = 100
/** Messages deleted per batch (statements hold row locks briefly; D21's "small batches" applies here too). */
export const MESSAGES_PER_BATCH = 5_000
/** Events deleted per batch, with their deliveries. */
export const EVENTS_PER_BATCH = 2_000
/** Ingest receipts deleted per batch. */
export const RECEIPTS_PER_BATCH = 5_000

/**
 * What one batch of a job did: `more` (call again), `completed` (the erasure
 * is done; its final counts), or `lost` (the lease is no longer this
 * worker's, or the erasure was already done: stop).
 */
export type Advance =
  | { readonly _tag: "more" }
  | { readonly _tag: "completed"; readonly counts: ErasureCounts }
  | { readonly _tag: "lost" }

/** The erasures service. */
export class Erasures extends Context.Service<
  Erasures,
  {
    /**
     * DELETE /contacts/{contact_id} (D22): starts the contact's erasure and
     * returns it (`pending`); while the contact's erasure is in progress
     * (the contact row gone, no new contact of that id), returns that same
     * erasure. Fails with ContactNotFound (404) for a contact unknown or
     * already erased. The request id of the log annotations (O8) is kept for
     * the completion's log line.
     */
    erase(organizationId: string, contactId: string): Effect.Effect<Erasure, ContactNotFound>
    /** GET /erasures/{id} (D22). Fails with ErasureNotFound (404): unknown, or another organization's. */
    get(organizationId: string, erasureId: string): Effect.Effect<Erasure, ErasureNotFound>
    /**
     * Leases an erasure pending (free or expired lease) to `workerId` for
     * `leaseMs`, the one pending longest of an organization, the organizations
     * in rotation (O11, `Database/Workers.ts` `makeOrganizationRotation`);
     * undefined when none.
     */
    claim(workerId: string, leaseMs: number): Effect.Effect<ClaimedErasure | undefined>
    /** Gives back the leases `workerId` holds (O5). */
    release(workerId: string): Effect.Effect<void>
    /**
     * One batch of a claimed erasure's job, in one transaction, renewing the
     * lease for `leaseMs` (see {@link Advance}). The last batch completes it
     * and writes `contact.erased`; then one log line carries the erasure's
     * id, its request's id and the counts, never content.
     */
    advance(erasure: ClaimedErasure, workerId: string, leaseMs: number): Effect.Effect<Advance>
  }
>()("parley/Erasures") {
  /** The service, its repository left open; requires `ErasuresRepo`. */
  static readonly layerNoDeps = Layer.effect(
    Erasures,
    Effect.gen(function* () {
      const repo = yield* ErasuresRepo

      const erase = Effect.fn("Erasures.erase")(function* (organizationId: string, contactId: string) {
        const annotations = yield* References.CurrentLogAnnotations
        const requestId = typeof annotations.request_id === "string" ? annotations.request_id : null
        const erasure = yield* repo
          .withTransaction(
            Effect.gen(function* () {
              const contact = yield* repo.lockContact(organizationId, contactId)
              if (!contact.found) return yield* repo.pendingOf(organizationId, contactId)
              const id = yield* repo.start(organizationId, contactId, requestId, contact.contacts)
              return yield* repo.find(organizationId, id)
            })
          )
          .pipe(Effect.orDie)
        if (erasure === undefined) return yield* new ContactNotFound()
        return erasure
      })

      const get = Effect.fn("Erasures.get")(function* (organizationId: string, erasureId: string) {
        const erasure = yield* repo.find(organizationId, erasureId).pipe(Effect.orDie)
        if (erasure === undefined) return yield* new ErasureNotFound()
        return erasure
      })

      /** Which organizations the claims visit, claim after claim (O11). */
      const rotation = makeOrganizationRotation()
      const claim = (workerId: string, leaseMs: number) =>
        rotation
          .claim(
            1,
            (after) => repo.discover(workerId, after, DISCOVERED_ORGANIZATIONS),
            (organizationId) => repo.claim(organizationId, workerId, leaseMs)
          )
          .pipe(
            Effect.map((claimed) => claimed[0]),
            Effect.orDie
          )

      /** One batch (see the module's docstring for the order); in the caller's transaction. */
      const batch = Effect.fnUntraced(function* (erasure: ClaimedErasure, counts: PartialCounts) {
        const events = yield* repo.deleteEvents(erasure, EVENTS_PER_BATCH)
        if (events.events > 0) return events as PartialCounts
        const sessions = yield* repo.sessionBatch(erasure, SESSIONS_PER_BATCH)
        if (sessions.length > 0) {
          const messages = yield* repo.deleteMessages(erasure, sessions, MESSAGES_PER_BATCH)
          if (messages === MESSAGES_PER_BATCH) return { messages } as PartialCounts
          return { messages, ...(yield* repo.deleteSessions(erasure, sessions)) } as PartialCounts
        }
        const stragglers = yield* repo.markStragglers(erasure)
        if (stragglers > 0) return {} as PartialCounts
        const receipts = yield* repo.deleteReceipts(erasure, RECEIPTS_PER_BATCH)
        if (receipts > 0) return { ingest_receipts: receipts } as PartialCounts
        return { _tag: "completed", counts: yield* repo.complete(erasure, counts) } as Advance
      })

      const advance = Effect.fn("Erasures.advance")(function* (
        erasure: ClaimedErasure,
        workerId: string,
        leaseMs: number
      ) {
        const result = yield* repo
          .withTransaction(
            Effect.gen(function* () {
              const counts = yield* repo.hold(erasure, workerId, leaseMs)
              if (counts === undefined) return { _tag: "lost" } as const
              const done = yield* batch(erasure, counts)
              if ("_tag" in done) return done as Advance
              yield* repo.saveCounts(erasure, addCounts(counts, done))
              return { _tag: "more" } as Advance
            })
          )
          .pipe(Effect.orDie)
        if (result._tag === "completed") {
          yield* Effect.logInfo("Contact erased").pipe(
            Effect.annotateLogs({
              erasure_id: erasure.id,
              organization_id: erasure.organization_id,
              request_id: erasure.request_id,
              ...Object.fromEntries(Object.entries(result.counts).map(([kind, n]) => [`erased.${kind}`, n]))
            })
          )
        }
        return result
      })

      const release = (workerId: string) => repo.release(workerId).pipe(Effect.orDie)

      return Erasures.of({ erase, get, claim, release, advance })
    })
  )

  /** The service over PostgreSQL; requires `PgClient` and `Ids`. */
  static readonly layer = Erasures.layerNoDeps.pipe(Layer.provide(ErasuresRepo.layer))
}
