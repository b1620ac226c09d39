/**
 * The messages service: create, get, update (delivery tracking), redact and
 * search (conversations.md "Messages"; DECISIONS.md D1, D3, D5, D12, D13, D23, W1).
 * Transactions are the repository's (`MessagesRepo.withTransaction`).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { JsonText } from "../Domain/Common.ts"
import { isUuid } from "../Domain/Common.ts"
import { type Content, type ContentInput, isClientContentType, isReaction } from "../Domain/Content.ts"
import { Forbidden, ValidationFailed } from "../Domain/Errors.ts"
import { IdempotencyRequest } from "../Domain/Idempotency.ts"
import type { DeliveryStatus, Message, MessageRole } from "../Domain/Message.ts"
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
import { DeliveryWakeup } from "../Webhooks/Wakeup.ts"
import type { CreateMessagePayload, SearchMessagesPayload, UpdateMessagePayload } from "./Api.ts"
import { InvalidContentType, MessageNotFound, MessageRedacted, ReferencedMessageNotFound } from "./Errors.ts"
import {
  type DeliveryFields,
  type DeliveryState,
  type HistoryEntry,
  type InsertResult,
  MessagesRepo,
  type NewMessage,
  type ReferencedMessage
} from "./Repo.ts"

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

/**
 * The message an insert stored, or why none was (D1, D5, D24): no session
 * (SessionNotFound), a `reply_to_message_id` not of the conversation
 * (ReferencedMessageNotFound), a session not open (SessionNotOpen).
 */
const insertedBody = (
  result: InsertResult
): Effect.Effect<JsonText<Message>, SessionNotFound | SessionNotOpen | ReferencedMessageNotFound> => {
  if (result.status === undefined) return Effect.fail(new SessionNotFound())
  if (!result.replyFound) return Effect.fail(new ReferencedMessageNotFound())
  if (result.body === undefined) return Effect.fail(new SessionNotOpen())
  return Effect.succeed(result.body as JsonText<Message>)
}

/** A uuid that names no message: what a `reply_to_message_id` that is not a uuid is looked up as (D24). */
const NO_MESSAGE = "00000000-0000-0000-0000-000000000000"

/**
 * Whether the locked message may be edited (D24): content a client sends
 * (text, image, audio, video, file; a reaction is replaced by another, the
 * runtime's payloads are not edited), to `content` of such a type too.
 * Fails with MessageRedacted (409) for a redacted message, InvalidContentType
 * (400) otherwise.
 */
const checkEdit = (
  state: DeliveryState,
  content: Content
): Effect.Effect<void, InvalidContentType | MessageRedacted> => {
  if (state.redacted) return Effect.fail(new MessageRedacted())
  const editable = (type: string) => isClientContentType(type) && type !== "reaction"
  return editable(state.content_type) && editable(content.type) ? Effect.void : Effect.fail(new InvalidContentType())
}

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
    ): Effect.Effect<
      JsonText<Message>,
      SessionNotFound | SessionNotOpen | InvalidContentType | ReferencedMessageNotFound
    >
    /** GET one. Fails with SessionNotFound, MessageNotFound, Forbidden (D1). */
    get(
      organizationId: string,
      sessionId: string,
      messageId: string
    ): Effect.Effect<Message, SessionNotFound | MessageNotFound | Forbidden>
    /**
     * PATCH delivery tracking (D13) and edits (D24: `content` other than the
     * current one keeps that in `edits` and stamps `edited_at`); emits
     * message.updated when a delivery field or the content changed (W1).
     * Fails with SessionNotFound, MessageNotFound, Forbidden (D1), and for
     * an edit with MessageRedacted (409) or InvalidContentType (400: a
     * reaction, the runtime's payloads, or new content of such a type).
     */
    update(
      organizationId: string,
      sessionId: string,
      messageId: string,
      input: UpdateMessage
    ): Effect.Effect<Message, SessionNotFound | MessageNotFound | Forbidden | InvalidContentType | MessageRedacted>
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
    history(
      organizationId: string,
      sessionId: string,
      limit: number,
      before?: Date
    ): Effect.Effect<ReadonlyArray<HistoryEntry>>
    /**
     * For ingest, inside its transaction (D24): the message of the
     * conversation `target` names, by Parley id or the channel's id, locked;
     * undefined when none.
     */
    referenced(
      organizationId: string,
      conversationId: string,
      target: string
    ): Effect.Effect<ReferencedMessage | undefined>
    /**
     * For ingest, inside its transaction (D24): `role`'s reaction `emoji`
     * ("" removes it) applied to the locked message `targetId`'s summary,
     * message.updated when it changed.
     */
    react(organizationId: string, targetId: string, role: MessageRole, emoji: string): Effect.Effect<void>
    /**
     * For ingest, inside its transaction (D24): edits the message to
     * `content`, as PATCH does; the message after, or undefined when it may
     * not be edited (redacted, or not of an editable type: nothing changes).
     */
    edit(organizationId: string, messageId: string, content: Content): Effect.Effect<Message | undefined>
  }
>()("parley/Messages") {
  /** The service, its repository left open; requires `MessagesRepo` and `DeliveryWakeup` (the one this process's delivery worker listens to). */
  static readonly layerNoDeps = Layer.effect(
    Messages,
    Effect.gen(function* () {
      const repo = yield* MessagesRepo
      const wakeup = yield* DeliveryWakeup

      /** The reply members of a POST message (D24): a `reply_to_message_id` that is not a uuid names no message. */
      const references = (input: CreateMessage) => ({
        provider_message_id: input.provider_message_id ?? null,
        replied_provider_message_id: input.replied_provider_message_id ?? null,
        reply_to_message_id:
          input.reply_to_message_id == null
            ? null
            : isUuid(input.reply_to_message_id)
              ? input.reply_to_message_id
              : NO_MESSAGE
      })

      /**
       * POST message of a reaction (D24), in one transaction: its target
       * (a message of the session's conversation, else 404 for a session not
       * found, 400 `Message not found`) locked, the reaction stored (as
       * `create`), the target's summary updated with message.updated.
       */
      const createReaction = (organizationId: string, sessionId: string, input: CreateMessage, content: Content) =>
        repo.withTransaction(
          Effect.gen(function* () {
            const target = yield* repo.lockReferenced(organizationId, { sessionId }, String(content.message_id), false)
            if (target === undefined) {
              if (!(yield* repo.sessionExists(organizationId, sessionId))) return yield* new SessionNotFound()
              return yield* new ReferencedMessageNotFound()
            }
            const idempotency = yield* Effect.serviceOption(IdempotencyRequest)
            const result = yield* repo.insert(
              organizationId,
              sessionId,
              { role: input.role, content, ...references(input), run_id: input.run_id ?? null },
              { idempotency: Option.getOrUndefined(idempotency) }
            )
            const body = yield* insertedBody(result)
            yield* repo.react(organizationId, target.id, input.role, String(content.emoji))
            return body
          })
        )

      const create = Effect.fn("Messages.create")(
        function* (organizationId: string, sessionId: string, input: CreateMessage) {
          const content = yield* validateContent(input.content)
          if (isReaction(content)) return yield* createReaction(organizationId, sessionId, input, content)
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
              ...references(input),
              run_id: input.run_id ?? null
            },
            { idempotency: Option.getOrUndefined(idempotency), notify: !wakeLocally }
          )
          const body = yield* insertedBody(result)
          // The statement is its own transaction: committed now, with a delivery when an app subscribes.
          if (wakeLocally && result.subscribed) wakeup.wake(organizationId)
          return body
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
              const state = yield* repo.lockDelivery(organizationId, messageId)
              const fields: { -readonly [K in keyof DeliveryFields]: DeliveryFields[K] } = {}
              if (input.content !== undefined) {
                const content = yield* validateContent(input.content)
                yield* checkEdit(state, content)
                fields.content = content
              }
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
              return yield* repo.updateDelivery(organizationId, messageId, fields)
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
              const locked = yield* repo.lockRedaction(organizationId, messageId)
              const target = locked.find((row) => row.id === messageId)
              // Redacted meanwhile (by another request, or as a payload of its run): as it is, nothing emitted.
              if (target === undefined || target.redacted) {
                return yield* locate(organizationId, sessionId, messageId)
              }
              const messageIds = locked.filter((row) => !row.redacted).map((row) => row.id)
              return yield* repo.redact(organizationId, messageId, messageIds)
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
          return yield* repo.search(organizationId, sessionId, {
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

      const history = (organizationId: string, sessionId: string, limit: number, before?: Date) =>
        repo.history(organizationId, sessionId, limit, before).pipe(Effect.orDie)

      const referenced = (organizationId: string, conversationId: string, target: string) =>
        repo.lockReferenced(organizationId, { conversationId }, target, true).pipe(Effect.orDie)

      const react = (organizationId: string, targetId: string, role: MessageRole, emoji: string) =>
        repo.react(organizationId, targetId, role, emoji).pipe(Effect.orDie)

      const edit = (organizationId: string, messageId: string, content: Content) =>
        Effect.gen(function* () {
          const state = yield* repo.lockDelivery(organizationId, messageId)
          const allowed = yield* checkEdit(state, content).pipe(
            Effect.as(true),
            Effect.catch(() => Effect.succeed(false))
          )
          return allowed ? yield* repo.updateDelivery(organizationId, messageId, { content }) : undefined
        }).pipe(Effect.orDie)

      return Messages.of({ create, get, update, redact, search, append, history, referenced, react, edit })
    })
  )

  /** The service over its PostgreSQL repository (`MessagesRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Messages.layerNoDeps.pipe(Layer.provide(MessagesRepo.layer))
}
