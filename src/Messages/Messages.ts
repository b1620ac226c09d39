/**
 * The messages service: create, get, update (delivery tracking), redact and
 * search (conversations.md "Messages"; DECISIONS.md D1, D3, D5, D12, D13, D23, W1).
 * Transactions are the repository's (`MessagesRepo.withTransaction`).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { JsonText } from "../Domain/Common.ts"
import { type Content, type ContentInput, isClientContentType } from "../Domain/Content.ts"
import { Forbidden, ValidationFailed } from "../Domain/Errors.ts"
import { IdempotencyRequest } from "../Domain/Idempotency.ts"
import type { DeliveryStatus, Message } from "../Domain/Message.ts"
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
import { DeliveryWakeup } from "../Webhooks/Wakeup.ts"
import type { CreateMessagePayload, SearchMessagesPayload, UpdateMessagePayload } from "./Api.ts"
import { InvalidContentType, MessageNotFound } from "./Errors.ts"
import { type DeliveryFields, type HistoryEntry, MessagesRepo, type NewMessage } from "./Repo.ts"

/** What the runtime reads of a session's history and gives to `append` (R2). */
export type { HistoryEntry, NewMessage }

/** Messages a search returns when the body gives no `limit` (D3). */
const DEFAULT_SEARCH_LIMIT = 100

/** Body of POST /sessions/{id}/messages, as its schema decodes it (`Api.ts`); a null id is none. */
export type CreateMessage = typeof CreateMessagePayload.Type

/** Body of PATCH /sessions/{id}/messages/{message_id} (D13), as its schema decodes it (`Api.ts`). */
export type UpdateMessage = typeof UpdateMessagePayload.Type

const progress: Record<DeliveryStatus, number> = { pending: 0, sent: 1, delivered: 2, read: 3, failed: 4, rejected: 4 }
const isFinal = (status: DeliveryStatus) => status === "failed" || status === "rejected"

/**
 * The delivery status after a PATCH asks for `requested` (D13): never backwards
 * along pending < sent < delivered < read, and failed/rejected are final.
 */
export const nextDeliveryStatus = (current: DeliveryStatus, requested: DeliveryStatus): DeliveryStatus => {
  if (isFinal(current)) return current
  if (isFinal(requested)) return requested
  return progress[requested] > progress[current] ? requested : current
}

/**
 * D12: client content must be of a client type (text, image, audio, video,
 * file), else InvalidContentType (400); its fields were checked when the
 * request was decoded (`ContentInput`, 422).
 */
export const validateContent = (content: ContentInput): Effect.Effect<Content, InvalidContentType> =>
  isClientContentType(content.type) ? Effect.succeed(content) : Effect.fail(new InvalidContentType())

/** The messages service; every method returns wire JSON. */
export class Messages extends Context.Service<
  Messages,
  {
    /**
     * POST: 201 Message, pending; emits message.created (W1). Fails per D1, D5,
     * D12. Runs its statement as its own transaction (never inside another):
     * with this process's delivery worker attached it wakes it once committed
     * (`Webhooks/Wakeup.ts`) instead of notifying every process.
     */
    create(
      organizationId: string,
      sessionId: string,
      input: CreateMessage
    ): Effect.Effect<JsonText<Message>, SessionNotFound | SessionNotOpen | InvalidContentType>
    /** GET one. Fails with SessionNotFound, MessageNotFound, Forbidden (D1). */
    get(
      organizationId: string,
      sessionId: string,
      messageId: string
    ): Effect.Effect<Message, SessionNotFound | MessageNotFound | Forbidden>
    /** PATCH delivery tracking (D13); emits message.updated when a delivery field changed (W1). */
    update(
      organizationId: string,
      sessionId: string,
      messageId: string,
      input: UpdateMessage
    ): Effect.Effect<Message, SessionNotFound | MessageNotFound | Forbidden>
    /**
     * POST .../messages/{message_id}/redact (D23): overwrites the message's
     * content with `{"type":"redacted"}` and sets `redacted_at` (and
     * `updated_at`), with the payloads of its run (the `function_call` and
     * `function_result` messages of the same session and `run_id`, R2) and
     * the copies of each inside its events not yet delivered; emits one
     * message.updated per message redacted (W1). Returns the message. A
     * message redacted already is returned as it is and nothing is emitted.
     * Closed sessions too (D5 does not apply). Fails with SessionNotFound,
     * MessageNotFound, Forbidden (D1).
     */
    redact(
      organizationId: string,
      sessionId: string,
      messageId: string
    ): Effect.Effect<Message, SessionNotFound | MessageNotFound | Forbidden>
    /**
     * POST /sessions/{id}/messages/search: oldest first (D3), `offset` 0 and
     * `limit` 100 unless given. `search.session_id` (the body's) must equal the
     * path's, else ValidationFailed at `["body", "session_id"]` (422). Fails
     * with SessionNotFound.
     */
    search(
      organizationId: string,
      sessionId: string,
      search: typeof SearchMessagesPayload.Type
    ): Effect.Effect<ReadonlyArray<Message>, SessionNotFound | ValidationFailed>
    /**
     * Appends a message written by the AI runtime (R2): any content type,
     * internal ones included (`function_call`, `function_result`), no client
     * validation; emits message.created (W1). Joins the caller's transaction.
     * Fails with SessionNotFound or SessionNotOpen (D5).
     */
    append(
      organizationId: string,
      sessionId: string,
      message: NewMessage
    ): Effect.Effect<JsonText<Message>, SessionNotFound | SessionNotOpen>
    /**
     * The latest `limit` text messages of the session, oldest first: the
     * history an AI run answers from (R2); with `before`, of the messages
     * created before that moment: the history a replay of a run started then
     * answers from (A16).
     */
    history(sessionId: string, limit: number, before?: Date): Effect.Effect<ReadonlyArray<HistoryEntry>>
  }
>()("parley/Messages") {
  /** The service, its repository left open; requires `MessagesRepo` and `DeliveryWakeup` (the one this process's delivery worker listens to). */
  static readonly layerNoDeps = Layer.effect(
    Messages,
    Effect.gen(function* () {
      const repo = yield* MessagesRepo
      const wakeup = yield* DeliveryWakeup

      const create = Effect.fn("Messages.create")(
        function* (organizationId: string, sessionId: string, input: CreateMessage) {
          const content = yield* validateContent(input.content)
          // D19 on the hot path: the statement claims the key and stores the response (Idempotency.around).
          const idempotency = yield* Effect.serviceOption(IdempotencyRequest)
          // Issue 16 item 4: with a delivery worker in this process, wake it here rather than by NOTIFY.
          const wakeLocally = wakeup.attached()
          const result = yield* repo.insert(
            organizationId,
            sessionId,
            {
              role: input.role,
              content,
              provider_message_id: input.provider_message_id ?? null,
              replied_provider_message_id: input.replied_provider_message_id ?? null,
              run_id: input.run_id ?? null
            },
            { idempotency: Option.getOrUndefined(idempotency), notify: !wakeLocally }
          )
          if (result.status === undefined) return yield* new SessionNotFound()
          if (result.body === undefined) return yield* new SessionNotOpen()
          // The statement is its own transaction: committed now, with a delivery when an app subscribes.
          if (wakeLocally && result.subscribed) wakeup.wake()
          return result.body as JsonText<Message>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      /** The message at the session path, or the D1 failure. */
      const locate = Effect.fnUntraced(function* (organizationId: string, sessionId: string, messageId: string) {
        const found = yield* repo.find(organizationId, sessionId, messageId)
        if (!found.sessionFound) return yield* new SessionNotFound()
        if (found.message === undefined) return yield* new MessageNotFound()
        if (found.message.organization_id !== organizationId) return yield* new Forbidden()
        if (found.message.session_id !== sessionId) return yield* new MessageNotFound()
        return found.message
      })

      const get = Effect.fn("Messages.get")(
        (organizationId: string, sessionId: string, messageId: string) => locate(organizationId, sessionId, messageId),
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const update = Effect.fn("Messages.update")(
        function* (organizationId: string, sessionId: string, messageId: string, input: UpdateMessage) {
          yield* locate(organizationId, sessionId, messageId)
          return yield* repo.withTransaction(
            Effect.gen(function* () {
              const state = yield* repo.lockDelivery(messageId)
              const fields: { -readonly [K in keyof DeliveryFields]: DeliveryFields[K] } = {}
              if (input.provider_message_id !== undefined) fields.provider_message_id = input.provider_message_id
              if (input.replied_provider_message_id !== undefined)
                fields.replied_provider_message_id = input.replied_provider_message_id
              if (input.delivery_error_code !== undefined) fields.delivery_error_code = input.delivery_error_code
              if (input.delivery_error_message !== undefined)
                fields.delivery_error_message = input.delivery_error_message
              if (input.delivered_at !== undefined) fields.delivered_at = input.delivered_at
              if (input.delivery_status !== undefined) {
                const next = nextDeliveryStatus(state.delivery_status, input.delivery_status)
                if (next !== state.delivery_status) {
                  fields.delivery_status = next
                  if (
                    (next === "delivered" || next === "read") &&
                    state.delivered_at === null &&
                    !fields.delivered_at
                  ) {
                    fields.delivered_at = new Date(yield* Clock.currentTimeMillis).toISOString()
                  }
                }
              }
              return yield* repo.updateDelivery(messageId, fields)
            })
          )
        },
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const redact = Effect.fn("Messages.redact")(
        function* (organizationId: string, sessionId: string, messageId: string) {
          const found = yield* locate(organizationId, sessionId, messageId)
          if (found.redacted_at !== null) return found
          return yield* repo.withTransaction(
            Effect.gen(function* () {
              const locked = yield* repo.lockRedaction(messageId)
              const target = locked.find((row) => row.id === messageId)
              // Redacted meanwhile (by another request, or as a payload of its run): as it is, nothing emitted.
              if (target === undefined || target.redacted) {
                return yield* locate(organizationId, sessionId, messageId)
              }
              const messageIds = locked.filter((row) => !row.redacted).map((row) => row.id)
              return yield* repo.redact(messageId, messageIds)
            })
          )
        },
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const search = Effect.fn("Messages.search")(
        function* (organizationId: string, sessionId: string, search: typeof SearchMessagesPayload.Type) {
          // D3: the body's session_id names the path's session.
          if (search.session_id !== sessionId) {
            return yield* ValidationFailed.one(
              ["body", "session_id"],
              "session_id must equal the session of the path",
              "value_error"
            )
          }
          if (!(yield* repo.sessionExists(organizationId, sessionId))) return yield* new SessionNotFound()
          return yield* repo.search(sessionId, {
            provider_message_id: search.provider_message_id,
            replied_provider_message_id: search.replied_provider_message_id,
            role: search.role,
            offset: search.offset ?? 0,
            limit: search.limit ?? DEFAULT_SEARCH_LIMIT
          })
        },
        Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
      )

      const append = Effect.fn("Messages.append")(
        function* (organizationId: string, sessionId: string, message: NewMessage) {
          const result = yield* repo.insert(organizationId, sessionId, message)
          if (result.status === undefined) return yield* new SessionNotFound()
          if (result.body === undefined) return yield* new SessionNotOpen()
          return result.body as JsonText<Message>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const history = (sessionId: string, limit: number, before?: Date) =>
        repo.history(sessionId, limit, before).pipe(Effect.orDie)

      return Messages.of({ create, get, update, redact, search, append, history })
    })
  )

  /** The service over its PostgreSQL repository (`MessagesRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Messages.layerNoDeps.pipe(Layer.provide(MessagesRepo.layer))
}
