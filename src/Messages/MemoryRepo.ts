/**
 * The messages repository in memory (`MessagesRepo.layerTest`, issue 13 item
 * 8) over a {@link MemoryDatabase}: the same answers as the SQL of `Repo.ts`
 * for what the `Messages` service's rules rely on (D1, D3, D5, D13, W1), so
 * those rules are tested without a database.
 *
 * The message write (a row and its message.created event) is exported for the
 * ingest repository in memory, as `Repo.ts` exports `insertMessageCtes`.
 */
import {
  type MemoryDatabase,
  type MemoryMessage,
  memoryStatement,
  memoryTimestamp,
  memoryTransaction,
  recordEvent,
  uuidKey
} from "../Database/Memory.ts"
import type { Content } from "../Domain/Content.ts"
import type { Message, MessageRole } from "../Domain/Message.ts"
import { sessionOf } from "../Sessions/MemoryRepo.ts"
import type { DeliveryFields, MessagesRepo } from "./Repo.ts"

/** The Message of a row as the wire has it (`Database/Json.ts` `messageJson`), members in the schema's order. */
const messageObject = (row: MemoryMessage): Message => ({
  id: row.id,
  session_id: row.session_id,
  conversation_id: row.conversation_id,
  organization_id: row.organization_id,
  role: row.role,
  content: structuredClone(row.content),
  provider_message_id: row.provider_message_id,
  replied_provider_message_id: row.replied_provider_message_id,
  run_id: row.run_id,
  delivery_status: row.delivery_status,
  delivery_error_code: row.delivery_error_code,
  delivery_error_message: row.delivery_error_message,
  delivered_at: row.delivered_at === null ? null : memoryTimestamp(row.delivered_at),
  metadata: structuredClone(row.metadata),
  created_at: memoryTimestamp(row.created_at),
  updated_at: row.updated_at === null ? null : memoryTimestamp(row.updated_at)
})

/**
 * A new message row (delivery `pending`, stamped `now`) with its
 * message.created event (W1, W2) (`insertMessageCtes`); `eventId` names the
 * event when given.
 */
export const insertMessage = (
  db: MemoryDatabase,
  row: {
    readonly id: string
    readonly organizationId: string
    readonly sessionId: string
    readonly conversationId: string
    readonly role: MessageRole
    readonly content: Content
    readonly providerMessageId: string | null
    readonly repliedProviderMessageId: string | null
    readonly runId: string | null
    readonly metadata: MemoryMessage["metadata"]
  },
  now: Date,
  eventId?: string
): MemoryMessage => {
  const message: MemoryMessage = {
    id: row.id,
    organization_id: row.organizationId,
    session_id: row.sessionId,
    conversation_id: row.conversationId,
    role: row.role,
    content: structuredClone(row.content),
    provider_message_id: row.providerMessageId,
    replied_provider_message_id: row.repliedProviderMessageId,
    run_id: row.runId,
    delivery_status: "pending",
    delivery_error_code: null,
    delivery_error_message: null,
    delivered_at: null,
    metadata: structuredClone(row.metadata),
    created_at: now,
    updated_at: null
  }
  db.messages.push(message)
  recordEvent(db, {
    type: "message.created",
    organizationId: message.organization_id,
    object: messageObject(message),
    now,
    id: eventId
  })
  return message
}

/** The delivery columns message.updated compares (W1). */
const deliveryColumns = (row: MemoryMessage) =>
  JSON.stringify([
    row.delivery_status,
    row.delivery_error_code,
    row.delivery_error_message,
    row.delivered_at?.getTime() ?? null,
    row.provider_message_id,
    row.replied_provider_message_id
  ])

/** Oldest first (D3): created_at, id. */
const oldestFirst = (a: MemoryMessage, b: MemoryMessage): number =>
  a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** The repository over `db` (see module docs). */
export const makeMemoryRepo = (db: MemoryDatabase): MessagesRepo["Service"] => {
  const statement = <A>(write: (now: Date) => A) => memoryStatement(db, write)
  const messageById = (messageId: string) => db.messages.find((message) => message.id === uuidKey(messageId))

  return {
    withTransaction: memoryTransaction(db),

    insert: (organizationId, sessionId, message) =>
      statement((now) => {
        const session = sessionOf(db, organizationId, sessionId)
        // No apps in this database: nothing fans out, so `subscribed` is false.
        if (session === undefined) return { status: undefined, body: undefined, subscribed: false }
        if (session.status !== "open") return { status: session.status, body: undefined, subscribed: false }
        const row = insertMessage(
          db,
          {
            id: db.newId(),
            organizationId,
            sessionId: session.id,
            conversationId: session.conversation_id,
            role: message.role,
            content: message.content,
            providerMessageId: message.provider_message_id,
            repliedProviderMessageId: message.replied_provider_message_id,
            runId: message.run_id,
            metadata: message.metadata ?? {}
          },
          now
        )
        return { status: session.status, body: JSON.stringify(messageObject(row)), subscribed: false }
      }),

    find: (organizationId, sessionId, messageId) =>
      statement(() => {
        const message = messageById(messageId)
        return {
          sessionFound: sessionOf(db, organizationId, sessionId) !== undefined,
          message: message === undefined ? undefined : messageObject(message)
        }
      }),

    lockDelivery: (messageId) =>
      statement(() => {
        const message = messageById(messageId)!
        return { id: message.id, delivery_status: message.delivery_status, delivered_at: message.delivered_at }
      }),

    updateDelivery: (messageId, fields: DeliveryFields) =>
      statement((now) => {
        const message = messageById(messageId)!
        const before = deliveryColumns(message)
        if (fields.provider_message_id !== undefined) message.provider_message_id = fields.provider_message_id
        if (fields.replied_provider_message_id !== undefined) {
          message.replied_provider_message_id = fields.replied_provider_message_id
        }
        if (fields.delivery_status !== undefined) message.delivery_status = fields.delivery_status
        if (fields.delivery_error_code !== undefined) message.delivery_error_code = fields.delivery_error_code
        if (fields.delivery_error_message !== undefined) message.delivery_error_message = fields.delivery_error_message
        if (fields.delivered_at !== undefined)
          message.delivered_at = fields.delivered_at === null ? null : new Date(fields.delivered_at)
        message.updated_at = now
        if (deliveryColumns(message) !== before) {
          recordEvent(db, {
            type: "message.updated",
            organizationId: message.organization_id,
            object: messageObject(message),
            now
          })
        }
        return messageObject(message)
      }),

    search: (sessionId, search) =>
      statement(() =>
        db.messages
          .filter(
            (message) =>
              message.session_id === sessionId &&
              (search.provider_message_id === undefined ||
                message.provider_message_id === search.provider_message_id) &&
              (search.replied_provider_message_id === undefined ||
                message.replied_provider_message_id === search.replied_provider_message_id) &&
              (search.role === undefined || message.role === search.role)
          )
          .sort(oldestFirst)
          .slice(search.offset, search.offset + search.limit)
          .map(messageObject)
      ),

    sessionExists: (organizationId, sessionId) =>
      statement(() => sessionOf(db, organizationId, sessionId) !== undefined),

    history: (sessionId, limit) =>
      statement(() => {
        const texts = db.messages
          .filter((message) => message.session_id === sessionId && message.content.type === "text")
          .sort(oldestFirst)
        return texts.slice(Math.max(0, texts.length - limit)).map((message) => ({
          role: message.role,
          text: String(message.content.text)
        }))
      })
  }
}
