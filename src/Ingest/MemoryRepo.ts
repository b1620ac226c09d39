/**
 * The ingest repository in memory (`IngestRepo.layerTest`, issue 13 item 8)
 * over a {@link MemoryDatabase}: the statements of `Repo.ts` step by step,
 * composed from the owners' in-memory writes (the sessions domain's contact,
 * conversation and session, the messages domain's message), so the `Ingest`
 * service's rules (D6-D11, D17, W1) are tested without a database.
 *
 * The advisory lock of D9 is implied: transactions of one database run one at
 * a time (`Database/Memory.ts`).
 */
import { defaultSettings, type MemoryDatabase, memoryStatement, memoryTransaction } from "../Database/Memory.ts"
import { insertMessage } from "../Messages/MemoryRepo.ts"
import { agentOf, conversationFor, insertSession, sessionOf, upsertContact } from "../Sessions/MemoryRepo.ts"
import type { IngestMessage, IngestRepo, IngestState } from "./Repo.ts"

/** The message row of an ingest call (no reply ids, no run, empty metadata). */
const messageRow = (
  organizationId: string,
  session: { readonly id: string; readonly conversation_id: string },
  message: IngestMessage
) => ({
  id: message.id,
  organizationId,
  sessionId: session.id,
  conversationId: session.conversation_id,
  role: message.role,
  content: message.content,
  providerMessageId: message.providerMessageId,
  repliedProviderMessageId: null,
  runId: null,
  metadata: {}
})

/** The repository over `db` (see module docs). */
export const makeMemoryRepo = (db: MemoryDatabase): IngestRepo["Service"] => ({
  withTransaction: memoryTransaction(db),

  lock: () => memoryStatement(db, () => undefined),

  // `ingestStepStatement`'s six steps, in its order.
  step: (input) =>
    memoryStatement(db, (now): IngestState => {
      const organizationId = input.organizationId
      const message = input.message
      // 1. The conversation of (organization, from, channel_type, to), created with its event (D8, W1).
      const { conversation, created } = conversationFor(
        db,
        {
          id: input.newId(),
          organizationId,
          contactId: input.contactId,
          channelType: input.channelType,
          channelTo: input.channelTo
        },
        now
      )
      // 2. Its latest open session (none in a conversation this call created).
      const open = created
        ? undefined
        : [...db.sessions.values()]
            .filter(
              (session) =>
                session.conversation_id === conversation.id &&
                session.organization_id === organizationId &&
                session.status === "open"
            )
            .sort(
              (a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
            )[0]
      // 3. The receipt of the provider_message_id (D10): claimed, or the first call's.
      const providerMessageId = message?.providerMessageId ?? null
      const duplicate =
        providerMessageId === null
          ? undefined
          : db.receipts.find(
              (receipt) =>
                receipt.conversation_id === conversation.id && receipt.provider_message_id === providerMessageId
            )
      if (providerMessageId !== null && duplicate === undefined) {
        db.receipts.push({
          organization_id: organizationId,
          conversation_id: conversation.id,
          provider_message_id: providerMessageId,
          message_id: message?.id ?? null,
          session_id: input.reuseOpen ? (open?.id ?? input.newSessionId) : input.newSessionId,
          created_at: now
        })
      }
      // 4. The contact (D8), unless the call is a duplicate.
      if (duplicate === undefined) {
        upsertContact(
          db,
          { organizationId, contactId: input.contactId, name: input.contactName, phone: input.contactPhone },
          now
        )
      }
      // 5. A plain message to the open session.
      const append = input.append && message !== undefined
      const appended =
        append && open !== undefined && duplicate === undefined
          ? insertMessage(db, messageRow(organizationId, open, message), now)
          : undefined
      // 6. The answer.
      const settings = db.settings.get(organizationId) ?? defaultSettings()
      const sessionAgent = open?.agent_id == null ? undefined : db.agents.get(open.agent_id)
      const defaultAgent = settings.default_agent_id === null ? undefined : db.agents.get(settings.default_agent_id)
      const requested =
        input.requestedAgentId === null ? undefined : agentOf(db, organizationId, input.requestedAgentId)
      return {
        conversation_id: conversation.id,
        conversation_created: created,
        session_id: open?.id ?? null,
        agent_id: open?.agent_id ?? null,
        thread_id: open?.thread_id ?? null,
        agent_type: sessionAgent?.type ?? null,
        metadata: open === undefined || append ? null : JSON.stringify(open.metadata),
        message_id: appended?.id ?? null,
        duplicate_message_id: duplicate?.message_id ?? null,
        duplicate_session_id: duplicate?.session_id ?? null,
        default_agent_id: defaultAgent?.id ?? null,
        default_agent_type: defaultAgent?.type ?? null,
        reply_debounce_seconds: settings.reply_debounce_seconds,
        requested_agent_id: requested?.id ?? null,
        requested_agent_type: requested?.type ?? null
      }
    }),

  // `ingestOpenStatement`: the session with session.created, then its first message with message.created.
  open: (input) =>
    memoryStatement(db, (now) => {
      const session = insertSession(
        db,
        {
          id: input.id,
          organizationId: input.organizationId,
          conversationId: input.conversationId,
          contactId: input.contactId,
          contactName: input.contactName,
          threadId: input.threadId,
          status: "open",
          agentId: input.agentId,
          metadata: input.metadata
        },
        now
      )
      return input.message === undefined
        ? null
        : insertMessage(db, messageRow(input.organizationId, session, input.message), now).id
    }),

  // `ingestMessageStatement`: into the open session only.
  insertMessage: (organizationId, sessionId, message, eventId) =>
    memoryStatement(db, (now) => {
      const session = sessionOf(db, organizationId, sessionId)
      if (session?.status !== "open") return false
      insertMessage(db, messageRow(organizationId, session, message), now, eventId)
      return true
    })
})
