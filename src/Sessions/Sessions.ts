/**
 * The sessions service: the one owner of the `sessions` table and of the rules
 * about sessions (conversations.md "Sessions", "Session status"; DECISIONS.md
 * D1, D2, D4-D8, D16, W1). The sessions API's operations, and the changes other
 * domains make to sessions inside their own transactions: ingest's closes,
 * agent changes and metadata patches (D9), the runtime's `should_close` (R2),
 * expiry (D16). Each change runs in one transaction with its outbox events (W2).
 *
 * Side effect of every close, whoever closes: the trigger `sessions_closed` of
 * migration `0005_replies.ts` cancels the session's pending schedules (status
 * `canceled`, error `Session closed`) and drops its pending reply job, in the
 * same transaction (D15, R1).
 *
 * Transactions are the repository's (`SessionsRepo.withTransaction`).
 */

import { Context, Effect, Layer } from "effect"
import { AgentNotFound } from "../Admin/Errors.ts"
import { retryWhileReferenceDeleted } from "../Database/Races.ts"
import type { AgentRef } from "../Domain/Agent.ts"
import type { JsonObject } from "../Domain/Common.ts"
import type { Session } from "../Domain/Session.ts"
import { Ids } from "../Shared/Ids.ts"
import type { CreateSessionPayload, SearchSessionsPayload, UpdateSessionPayload } from "./Api.ts"
import { SessionNotFound, SessionNotOpen } from "./Errors.ts"
import { type RunState, type SessionEvent, type SessionState, SessionsRepo } from "./Repo.ts"

/** Sessions a search returns when the body gives no `limit` (D2). */
const DEFAULT_SEARCH_LIMIT = 10

/** Body of POST /sessions, as its schema decodes it (`Api.ts`). */
export type CreateSession = typeof CreateSessionPayload.Type

/** `fields` of PATCH /sessions/{id} (D4), as its schema decodes it (`Api.ts`). */
export type SessionFields = (typeof UpdateSessionPayload.Type)["fields"]

/**
 * Why a session closes, which decides its events (W1): `finish` (POST finish,
 * PATCH to closed) and `system` (a `should_close` tool, R2) emit
 * session.finished and session.closed with `action: null`; `expiry` (D16) both
 * with `action: "expired"`; `ingest` (ingest's `new` and `close`, D9) only
 * session.closed with `action: "ingest"`.
 */
export type CloseReason =
  | { readonly kind: "finish"; readonly endingSurveyId?: string | undefined }
  | { readonly kind: "system" }
  | { readonly kind: "expiry" }
  | { readonly kind: "ingest" }

/** The events of a close (W1). */
const closeEvents = (reason: CloseReason): ReadonlyArray<SessionEvent> => {
  switch (reason.kind) {
    case "ingest":
      return [{ type: "session.closed", action: "ingest" }]
    case "expiry":
      return [
        { type: "session.finished", action: "expired" },
        { type: "session.closed", action: "expired" }
      ]
    default:
      return [
        { type: "session.finished", action: null },
        { type: "session.closed", action: null }
      ]
  }
}

/**
 * D7: the thread of a session getting `agent` while it has `thread`: kept once
 * set, a new id (of `newId`) when the session first gets an AI agent, else none.
 */
export const threadFor = (agent: AgentRef | null, thread: string | null, newId: () => string): string | null =>
  thread ?? (agent?.type === "ai" ? newId() : null)

/** The sessions service (see module docs). Unknown or foreign sessions fail with SessionNotFound (D1). */
export class Sessions extends Context.Service<
  Sessions,
  {
    /** POST /sessions: the created Session; emits conversation.created when new, session.created (W1). Fails with AgentNotFound (D6). */
    create(organizationId: string, input: CreateSession): Effect.Effect<Session, AgentNotFound>
    /** GET /sessions/{id}. Fails with SessionNotFound (D1). */
    get(organizationId: string, sessionId: string): Effect.Effect<Session, SessionNotFound>
    /** POST /sessions/search: newest first (D2), `offset` 0 and `limit` 10 unless given. */
    search(organizationId: string, search: typeof SearchSessionsPayload.Type): Effect.Effect<ReadonlyArray<Session>>
    /** PATCH /sessions/{id} (D4). Fails with SessionNotFound, SessionNotOpen (D4, D5), AgentNotFound (D6). */
    update(
      organizationId: string,
      sessionId: string,
      fields: SessionFields
    ): Effect.Effect<Session, SessionNotFound | SessionNotOpen | AgentNotFound>
    /** POST /sessions/{id}/transfer: null removes the agent; emits session.transferred on every call (W1). */
    transfer(
      organizationId: string,
      sessionId: string,
      agentId: string | null
    ): Effect.Effect<Session, SessionNotFound | SessionNotOpen | AgentNotFound>
    /** POST /sessions/{id}/finish: closes ({@link CloseReason} `finish`). Fails with SessionNotFound, SessionNotOpen (D5). */
    finish(
      organizationId: string,
      sessionId: string,
      endingSurveyId: string | undefined
    ): Effect.Effect<Session, SessionNotFound | SessionNotOpen>
    /**
     * Closes an open session for `reason` with its events (W1), inside the
     * caller's transaction when there is one (the row is locked). Returns
     * false when the session is missing or already closed. Side effect (the
     * trigger `sessions_closed`, see module docs): the session's pending
     * schedules end `canceled` and its pending reply job is dropped (D15, R1).
     */
    close(organizationId: string, sessionId: string, reason: CloseReason): Effect.Effect<boolean>
    /**
     * Gives the session `agent` (null: none) with the D7 thread and emits
     * session.transferred, inside the caller's transaction, on a session it
     * has locked; returns the session's agent and thread after the change.
     */
    assignAgent(
      session: { readonly organizationId: string; readonly id: string; readonly threadId: string | null },
      agent: AgentRef | null
    ): Effect.Effect<{ readonly agentId: string | null; readonly threadId: string | null }>
    /** What an AI run needs of the session (R2), or undefined when it is not in the organization. */
    runState(organizationId: string, sessionId: string): Effect.Effect<RunState | undefined>
    /** Sets the node the session's next AI turn starts from (R2 `next_node`), in the caller's transaction. */
    setCurrentNode(organizationId: string, sessionId: string, nodeId: string | null): Effect.Effect<void>
    /** Replaces the metadata of a session the caller's transaction has locked (bumps `updated_at`, no event: W1). */
    setMetadata(organizationId: string, sessionId: string, metadata: JsonObject): Effect.Effect<void>
    /**
     * One sweep of automatic closing (D16): closes at most `limit` open sessions
     * idle past their organization's `session_idle_timeout_seconds`
     * ({@link CloseReason} `expiry`). Returns how many were closed.
     */
    expireIdle(limit: number): Effect.Effect<number>
  }
>()("parley/Sessions") {
  /** The service, its repository left open; requires `SessionsRepo`. */
  static readonly layerNoDeps = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const repo = yield* SessionsRepo
      const { newId } = yield* Ids

      /** The session as committed; it exists (the caller just wrote it). */
      const current = (organizationId: string, sessionId: string) =>
        Effect.map(repo.find(organizationId, sessionId), (session) => session!).pipe(Effect.orDie)

      /** D6: the agent `agentId` of the organization (null: none). */
      const agentOf = Effect.fnUntraced(function* (organizationId: string, agentId: string | null) {
        if (agentId === null) return null
        const agent = yield* repo.findAgent(organizationId, agentId)
        if (agent === undefined) return yield* new AgentNotFound()
        return agent
      })

      const assignAgent = (
        session: { readonly organizationId: string; readonly id: string; readonly threadId: string | null },
        agent: AgentRef | null
      ) =>
        Effect.gen(function* () {
          const threadId = threadFor(agent, session.threadId, newId)
          yield* repo.update(session.organizationId, session.id, { agentId: agent?.id ?? null, threadId })
          yield* repo.writeEvents(session.organizationId, session.id, [{ type: "session.transferred" }])
          return { agentId: agent?.id ?? null, threadId }
        }).pipe(Effect.orDie)

      /** Closes the locked open session `state` for `reason` (see module docs for the trigger it fires). */
      const closeLocked = (state: SessionState, reason: CloseReason) =>
        repo
          .update(state.organization_id, state.id, {
            status: "closed",
            ...(reason.kind === "finish" && reason.endingSurveyId !== undefined
              ? { endingSurveySubmissionId: reason.endingSurveyId }
              : {})
          })
          .pipe(Effect.andThen(repo.writeEvents(state.organization_id, state.id, closeEvents(reason))))

      /**
       * Runs `change` on the locked session inside a transaction (it writes
       * and emits through the owner's helpers) and returns the session as
       * committed.
       */
      const change = <E>(
        organizationId: string,
        sessionId: string,
        change: (state: SessionState) => Effect.Effect<void, E | SessionNotOpen>
      ) =>
        repo
          .withTransaction(
            Effect.gen(function* () {
              const state = yield* repo.lock(organizationId, sessionId)
              if (state === undefined) return yield* new SessionNotFound()
              yield* change(state)
              return yield* current(organizationId, state.id)
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))

      const create = Effect.fn("Sessions.create")(
        function* (organizationId: string, input: CreateSession) {
          const agent = yield* agentOf(organizationId, input.agent_id ?? null)
          const id = newId()
          // The contact's conversation may be deleted (D21, D22) between the statement's read and its insert.
          yield* retryWhileReferenceDeleted(
            repo.create({
              id,
              organizationId,
              contactId: input.contact_id,
              contactName: input.contact_name,
              threadId: threadFor(agent, null, newId),
              status: input.status ?? "open",
              agentId: agent?.id ?? null,
              metadata: input.metadata ?? {}
            })
          )
          return yield* current(organizationId, id)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const get = Effect.fn("Sessions.get")(
        function* (organizationId: string, sessionId: string) {
          const session = yield* repo.find(organizationId, sessionId)
          if (session === undefined) return yield* new SessionNotFound()
          return session
        },
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const search = Effect.fn("Sessions.search")(
        (organizationId: string, search: typeof SearchSessionsPayload.Type) =>
          repo.search(organizationId, {
            contactId: search.contact_id,
            status: search.status,
            metadata: search.metadata,
            offset: search.offset ?? 0,
            limit: search.limit ?? DEFAULT_SEARCH_LIMIT
          }),
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const update = Effect.fn("Sessions.update")((organizationId: string, sessionId: string, fields: SessionFields) =>
        change(organizationId, sessionId, (state) =>
          Effect.gen(function* () {
            if (state.status === "closed") {
              return yield* fields.status === "open" ? Effect.fail(SessionNotOpen.cannotReopen()) : new SessionNotOpen()
            }
            // The members apply in the order metadata, agent, status (docs/conversations.md "Sessions",
            // PATCH /sessions/{session_id}).
            if (fields.metadata !== undefined)
              yield* repo.update(state.organization_id, state.id, { metadata: fields.metadata })
            if (fields.agent_id !== undefined) {
              yield* assignAgent(
                { organizationId: state.organization_id, id: state.id, threadId: state.thread_id },
                yield* agentOf(organizationId, fields.agent_id)
              )
            }
            if (fields.status === "closed") yield* closeLocked(state, { kind: "finish" })
          })
        )
      )

      const transfer = Effect.fn("Sessions.transfer")(
        (organizationId: string, sessionId: string, agentId: string | null) =>
          change(organizationId, sessionId, (state) =>
            Effect.gen(function* () {
              if (state.status === "closed") return yield* new SessionNotOpen()
              yield* assignAgent(
                { organizationId: state.organization_id, id: state.id, threadId: state.thread_id },
                yield* agentOf(organizationId, agentId)
              )
            })
          )
      )

      const finish = Effect.fn("Sessions.finish")(
        (organizationId: string, sessionId: string, endingSurveyId: string | undefined) =>
          change(organizationId, sessionId, (state) =>
            Effect.gen(function* () {
              if (state.status === "closed") return yield* new SessionNotOpen()
              yield* closeLocked(state, { kind: "finish", endingSurveyId })
            })
          )
      )

      const close = Effect.fn("Sessions.close")(
        (organizationId: string, sessionId: string, reason: CloseReason) =>
          repo.withTransaction(
            Effect.gen(function* () {
              const state = yield* repo.lock(organizationId, sessionId)
              if (state === undefined || state.status === "closed") return false
              yield* closeLocked(state, reason)
              return true
            })
          ),
        Effect.catchTag("SqlError", Effect.die)
      )

      const setMetadata = (organizationId: string, sessionId: string, metadata: JsonObject) =>
        repo.update(organizationId, sessionId, { metadata }).pipe(Effect.orDie)

      const expireIdle = Effect.fn("Sessions.expireIdle")(
        function* (limit: number) {
          const candidates = yield* repo.idleSessions(limit)
          let closed = 0
          for (const candidate of candidates) {
            // Re-checked under the row lock: a message inserted since the scan keeps the session open.
            const done = yield* repo.withTransaction(
              Effect.gen(function* () {
                const state = yield* repo.lock(candidate.organization_id, candidate.id)
                if (
                  state === undefined ||
                  state.status === "closed" ||
                  !(yield* repo.isIdle(state.organization_id, state.id))
                )
                  return false
                yield* closeLocked(state, { kind: "expiry" })
                return true
              })
            )
            if (done) closed++
          }
          return closed
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const runState = (organizationId: string, sessionId: string) =>
        repo.runState(organizationId, sessionId).pipe(Effect.orDie)

      const setCurrentNode = (organizationId: string, sessionId: string, nodeId: string | null) =>
        repo.setCurrentNode(organizationId, sessionId, nodeId).pipe(Effect.orDie)

      return Sessions.of({
        runState,
        setCurrentNode,
        create,
        get,
        search,
        update,
        transfer,
        finish,
        close,
        assignAgent,
        setMetadata,
        expireIdle
      })
    })
  )

  /** The service over its PostgreSQL repository (`SessionsRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Sessions.layerNoDeps.pipe(Layer.provide(SessionsRepo.layer))
}
