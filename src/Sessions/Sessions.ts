/**
 * The sessions service: create, get, search, update (PATCH), transfer and
 * finish (conversations.md "Sessions"; DECISIONS.md D1, D2, D4-D8, W1).
 * Each change runs in one transaction with its outbox events (W2).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { JsonObject, JsonText } from "../Domain/Common.ts"
import { AgentNotFound, SessionNotFound, SessionNotOpen } from "../Domain/Errors.ts"
import type { Session, SessionStatus } from "../Domain/Session.ts"
import { newId } from "../Shared/Ids.ts"
import { type SessionEvent, type SessionSearch, type SessionState, SessionsRepo } from "./Repo.ts"

/** Body of POST /sessions. */
export interface CreateSession {
  readonly contact_id: string
  readonly contact_name: string
  readonly agent_id?: string | undefined
  readonly status?: SessionStatus | undefined
  readonly metadata?: JsonObject | undefined
}

/** `fields` of PATCH /sessions/{id} (D4): `agent_id` present and null removes the agent. */
export interface SessionFields {
  readonly metadata?: JsonObject | undefined
  readonly status?: SessionStatus | undefined
  readonly agent_id?: string | null | undefined
}

/** The sessions service; every method returns the session's wire JSON. */
export class Sessions extends Context.Service<
  Sessions,
  {
    /** POST /sessions: 201 Session; emits conversation.created when new, session.created. Fails with AgentNotFound (D6). */
    create(organizationId: string, input: CreateSession): Effect.Effect<JsonText<Session>, AgentNotFound>
    /** GET /sessions/{id}. Fails with SessionNotFound (D1). */
    get(organizationId: string, sessionId: string): Effect.Effect<JsonText<Session>, SessionNotFound>
    /** POST /sessions/search: newest first (D2); a JSON array. */
    search(organizationId: string, search: SessionSearch): Effect.Effect<JsonText<ReadonlyArray<Session>>>
    /** PATCH /sessions/{id} (D4). Fails with SessionNotFound, SessionNotOpen (D4, D5), AgentNotFound (D6). */
    update(
      organizationId: string,
      sessionId: string,
      fields: SessionFields
    ): Effect.Effect<JsonText<Session>, SessionNotFound | SessionNotOpen | AgentNotFound>
    /** POST /sessions/{id}/transfer: null removes the agent; emits session.transferred (W1). */
    transfer(
      organizationId: string,
      sessionId: string,
      agentId: string | null
    ): Effect.Effect<JsonText<Session>, SessionNotFound | SessionNotOpen | AgentNotFound>
    /** POST /sessions/{id}/finish: closes; emits session.finished and session.closed with `action: null` (W1). */
    finish(
      organizationId: string,
      sessionId: string,
      endingSurveyId: string | undefined
    ): Effect.Effect<JsonText<Session>, SessionNotFound | SessionNotOpen>
    /**
     * Closes an open session for the system (a `should_close` tool of the AI
     * runtime, R2): session.finished and session.closed with `action` (W1).
     * Joins the caller's transaction when there is one. Answers false when the
     * session is missing or already closed.
     */
    closeBySystem(organizationId: string, sessionId: string, action: string | null): Effect.Effect<boolean>
    /**
     * One sweep of automatic closing (D16): closes at most `limit` open sessions
     * idle past their organization's `session_idle_timeout_seconds`, each with
     * session.finished and session.closed, `action: "expired"` (W1). Answers how
     * many were closed.
     */
    expireIdle(limit: number): Effect.Effect<number>
  }
>()("parley/Sessions") {
  static readonly layer = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      const repo = yield* SessionsRepo

      const currentJson = (organizationId: string, sessionId: string) =>
        repo.getJson(organizationId, sessionId).pipe(Effect.map((body) => body as JsonText<Session>))

      /** Resolves a new agent for a session: D6 check, D7 thread. */
      const resolveAgent = Effect.fnUntraced(function* (
        organizationId: string,
        agentId: string | null,
        threadId: string | null
      ) {
        if (agentId === null) return { agentId: null, threadId }
        const agent = yield* repo.findAgent(organizationId, agentId)
        if (agent === undefined) return yield* new AgentNotFound()
        return { agentId: agent.id, threadId: threadId ?? (agent.type === "ai" ? newId() : null) }
      })

      /**
       * Runs `change` on the locked session inside a transaction, writes its
       * events and answers the session as committed.
       */
      const change = <E>(
        organizationId: string,
        sessionId: string,
        change: (state: SessionState) => Effect.Effect<ReadonlyArray<SessionEvent>, E, never>
      ) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const state = yield* repo.lock(organizationId, sessionId)
              if (state === undefined) return yield* new SessionNotFound()
              const events = yield* change(state)
              yield* repo.writeEvents(state.id, events)
              return (yield* currentJson(organizationId, state.id))!
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))

      const transferTo = Effect.fnUntraced(function* (
        organizationId: string,
        state: SessionState,
        agentId: string | null
      ) {
        const resolved = yield* resolveAgent(organizationId, agentId, state.thread_id)
        yield* repo.update(state.id, { agentId: resolved.agentId, threadId: resolved.threadId })
        return { type: "session.transferred" } as const
      })

      const close = (state: SessionState, endingSurveyId: string | undefined) =>
        repo
          .update(state.id, {
            status: "closed",
            ...(endingSurveyId !== undefined ? { endingSurveySubmissionId: endingSurveyId } : {})
          })
          .pipe(
            Effect.as([
              { type: "session.finished", action: null },
              { type: "session.closed", action: null }
            ] as const)
          )

      const create = Effect.fn("Sessions.create")(
        function* (organizationId: string, input: CreateSession) {
          const agent = yield* resolveAgent(organizationId, input.agent_id ?? null, null)
          const id = newId()
          yield* repo.create({
            id,
            organizationId,
            contactId: input.contact_id,
            contactName: input.contact_name,
            threadId: agent.threadId,
            status: input.status ?? "open",
            agentId: agent.agentId,
            metadata: input.metadata ?? {}
          })
          return (yield* currentJson(organizationId, id))!
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const get = Effect.fn("Sessions.get")(
        function* (organizationId: string, sessionId: string) {
          const body = yield* currentJson(organizationId, sessionId)
          if (body === undefined) return yield* new SessionNotFound()
          return body
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const search = Effect.fn("Sessions.search")(
        (organizationId: string, search: SessionSearch) =>
          repo.search(organizationId, search).pipe(Effect.map((body) => body as JsonText<ReadonlyArray<Session>>)),
        Effect.catchTag("SqlError", Effect.die)
      )

      const update = Effect.fn("Sessions.update")((organizationId: string, sessionId: string, fields: SessionFields) =>
        change(organizationId, sessionId, (state) =>
          Effect.gen(function* () {
            if (state.status === "closed") {
              return yield* fields.status === "open" ? Effect.fail(SessionNotOpen.cannotReopen()) : new SessionNotOpen()
            }
            const events: Array<SessionEvent> = []
            if (fields.metadata !== undefined) yield* repo.update(state.id, { metadata: fields.metadata })
            if (fields.agent_id !== undefined) events.push(yield* transferTo(organizationId, state, fields.agent_id))
            if (fields.status === "closed") events.push(...(yield* close(state, undefined)))
            return events
          })
        )
      )

      const transfer = Effect.fn("Sessions.transfer")(
        (organizationId: string, sessionId: string, agentId: string | null) =>
          change(organizationId, sessionId, (state) =>
            Effect.gen(function* () {
              if (state.status === "closed") return yield* new SessionNotOpen()
              return [yield* transferTo(organizationId, state, agentId)]
            })
          )
      )

      const finish = Effect.fn("Sessions.finish")(
        (organizationId: string, sessionId: string, endingSurveyId: string | undefined) =>
          change(organizationId, sessionId, (state) =>
            Effect.gen(function* () {
              if (state.status === "closed") return yield* new SessionNotOpen()
              return yield* close(state, endingSurveyId)
            })
          )
      )

      const closeBySystem = Effect.fn("Sessions.closeBySystem")(
        (organizationId: string, sessionId: string, action: string | null) =>
          sql.withTransaction(
            Effect.gen(function* () {
              const state = yield* repo.lock(organizationId, sessionId)
              if (state === undefined || state.status === "closed") return false
              yield* repo.update(state.id, { status: "closed" })
              yield* repo.writeEvents(state.id, [
                { type: "session.finished", action },
                { type: "session.closed", action }
              ])
              return true
            })
          ),
        Effect.catchTag("SqlError", Effect.die)
      )

      const expireIdle = Effect.fn("Sessions.expireIdle")(
        function* (limit: number) {
          const candidates = yield* repo.idleSessions(limit)
          let closed = 0
          for (const candidate of candidates) {
            // Re-checked under the row lock: a message inserted since the scan keeps the session open.
            const done = yield* sql.withTransaction(
              Effect.gen(function* () {
                const state = yield* repo.lock(candidate.organization_id, candidate.id)
                if (state === undefined || state.status === "closed" || !(yield* repo.isIdle(state.id))) return false
                yield* repo.update(state.id, { status: "closed" })
                yield* repo.writeEvents(state.id, [
                  { type: "session.finished", action: "expired" },
                  { type: "session.closed", action: "expired" }
                ])
                return true
              })
            )
            if (done) closed++
          }
          return closed
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Sessions.of({ create, get, search, update, transfer, finish, closeBySystem, expireIdle })
    })
  )
}
