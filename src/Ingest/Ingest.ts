/**
 * The ingest service (conversations.md "Unified ingest", "Session status";
 * DECISIONS.md D6-D12, D17, W1, W2): one call finds or creates the contact and
 * the conversation, handles the session's lifecycle, stores the message,
 * changes the agent, patches the metadata and triggers the AI reply, in one
 * transaction with its outbox events.
 *
 * Calls for one (organization, channel_type, to, from) are serialized across
 * processes by a PostgreSQL advisory transaction lock taken first (D9), so
 * concurrent calls never create duplicate contacts, conversations or open
 * sessions. A `provider_message_id` is claimed in `ingest_receipts` (primary
 * key (conversation, provider_message_id)) before anything changes; a repeated
 * one gets the first call's ids and does nothing else (D10).
 *
 * The transaction is the repository's (`IngestRepo.withTransaction`), which the
 * sessions and replies services join.
 */

import { Context, Effect, Layer } from "effect"
import { AgentNotFound } from "../Admin/Errors.ts"
import { retryWhileReferenceDeleted } from "../Database/Races.ts"
import type { AgentRef } from "../Domain/Agent.ts"
import { isUuid, type JsonObject, MAX_METADATA_BYTES } from "../Domain/Common.ts"
import { type Content, isReaction } from "../Domain/Content.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import type { InvalidContentType } from "../Messages/Errors.ts"
import { Messages, validateContent } from "../Messages/Messages.ts"
import { Replies } from "../Replies/Replies.ts"
import { Sessions, threadFor } from "../Sessions/Sessions.ts"
import { Ids } from "../Shared/Ids.ts"
import { applyMergePatch } from "../Shared/MergePatch.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"
import { DEFAULT_CHANNEL_TYPE, type IngestPayload, type IngestResponse, type IngestSessionMode } from "./Api.ts"
import { type IngestMessage, IngestRepo, type IngestState } from "./Repo.ts"

/** The message of an ingest call, with whether it may trigger a reply (D11; not a reaction or an edit, D24). */
interface Incoming extends IngestMessage {
  readonly triggersReply: boolean
}

/** The session an ingest call acts on. */
interface Target {
  readonly id: string
  readonly agentId: string | null
  readonly agentType: "ai" | "human" | null
  readonly threadId: string | null
}

/** The response of POST /ingest ({@link IngestResponse}). */
const responseOf = (
  conversationId: string,
  sessionId: string | null,
  messageId: string | null,
  createdConversation: boolean,
  createdSession: boolean
): IngestResponse => ({
  conversation_id: conversationId,
  session_id: sessionId,
  message_id: messageId,
  created_conversation: createdConversation,
  created_session: createdSession
})

/**
 * `current` with the RFC 7396 merge `patch` applied; fails
 * with ValidationFailed at `["body", "metadata"]` when the result is over 16
 * KiB as JSON (D17).
 */
const patchMetadata = (current: JsonObject, patch: JsonObject): Effect.Effect<JsonObject, ValidationFailed> => {
  const result = applyMergePatch(current, patch) as JsonObject
  return Buffer.byteLength(JSON.stringify(result), "utf8") <= MAX_METADATA_BYTES
    ? Effect.succeed(result)
    : Effect.fail(
        ValidationFailed.one(
          ["body", "metadata"],
          `Metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON after the patch`
        )
      )
}

/** The ingest service. */
export class Ingest extends Context.Service<
  Ingest,
  {
    /**
     * POST /ingest for the organization (spec "Unified ingest"): returns the
     * five fields of {@link IngestResponse}. Session semantics: `continue`
     * reuses the open session or creates one (also without content, D9); `new`
     * closes the open session (session.closed, `action: "ingest"`, W1) and
     * creates one; `close` inserts the message (if any) into the open session
     * (or a new one) and closes it (session.closed, `action: "ingest"`);
     * `close` without content and without an open session gets
     * `session_id: null` (D9). A new session gets `agent_id`, else the
     * organization's `default_agent_id` (D9), carried by session.created; on an
     * existing session a different `agent_id` (null removes) emits
     * session.transferred (W1). A thread is made when a session first gets an
     * AI agent (D7). A `user` message in an open session whose agent is AI
     * triggers a reply job due in the organization's `reply_debounce_seconds`
     * (D11). Events in order: conversation.created, session.closed,
     * session.created, session.transferred, message.created, session.closed.
     * Calls for one (organization, channel_type, to, from) run one at a time
     * across processes (D9). A message whose `provider_message_id` this
     * conversation already stored gets the first call's ids with both
     * `created_*` false and changes nothing (D10).
     *
     * Fails with InvalidContentType (400) or ValidationFailed (422) for bad
     * content (D12), AgentNotFound (400) for an agent that is not the
     * organization's (D6), ValidationFailed at `["body", "metadata"]` when the
     * patched metadata is over 16 KiB (D17). Nothing is written on failure.
     */
    ingest(
      organizationId: string,
      input: IngestPayload
    ): Effect.Effect<IngestResponse, AgentNotFound | InvalidContentType | ValidationFailed>
  }
>()("parley/Ingest") {
  /** The service, its repository left open; requires `IngestRepo`, `Sessions`, `Replies`, `Messages` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Ingest,
    Effect.gen(function* () {
      const repo = yield* IngestRepo
      const { newId } = yield* Ids
      const sessions = yield* Sessions
      const replies = yield* Replies
      const messages = yield* Messages

      /** Closes the locked open session for ingest: session.closed with `action: "ingest"` only (W1). */
      const close = (organizationId: string, sessionId: string) =>
        sessions.close(organizationId, sessionId, { kind: "ingest" })

      /**
       * D11: a reply for a `user` message in a session whose agent is AI (and
       * so has a thread, D7); never for a reaction or an edit (D24).
       */
      const replyIfAi = (organizationId: string, target: Target, message: Incoming, debounceSeconds: number) =>
        message.role === "user" && message.triggersReply
          ? replies.trigger(
              organizationId,
              {
                id: target.id,
                status: "open",
                agent_id: target.agentId,
                agent_type: target.agentType,
                thread_id: target.threadId
              },
              { debounceSeconds }
            )
          : Effect.void

      /**
       * Everything but a plain message to an open session: the session
       * lifecycle of `mode`, agent change, metadata patch and the message,
       * after the step locked the open session `FOR UPDATE` and claimed the
       * receipt.
       */
      const control = Effect.fnUntraced(function* (
        organizationId: string,
        input: IngestPayload,
        mode: IngestSessionMode,
        message: Incoming | undefined,
        newSessionId: string,
        state: IngestState,
        traceContext: string | null
      ) {
        // D6: the requested agent (undefined keeps, null removes).
        let requested: AgentRef | null | undefined = input.agent_id === null ? null : undefined
        if (typeof input.agent_id === "string") {
          if (state.requested_agent_id === null) return yield* new AgentNotFound()
          requested = { id: state.requested_agent_id, type: state.requested_agent_type! }
        }
        let target: Target | undefined =
          state.session_id === null
            ? undefined
            : {
                id: state.session_id,
                agentId: state.agent_id,
                agentType: state.agent_type,
                threadId: state.thread_id
              }
        if (target !== undefined && mode === "new") {
          yield* close(organizationId, target.id)
          target = undefined
        }
        let createdSession = false
        let messageId: string | null = null
        if (target === undefined) {
          if (mode === "close" && message === undefined) {
            return responseOf(state.conversation_id, null, null, state.conversation_created, false)
          }
          // D9: a new session without agent_id gets the organization's default agent.
          const agent: AgentRef | null =
            requested !== undefined
              ? requested
              : state.default_agent_id === null
                ? null
                : { id: state.default_agent_id, type: state.default_agent_type! }
          const metadata = input.metadata === undefined ? {} : yield* patchMetadata({}, input.metadata)
          target = {
            id: newSessionId,
            agentId: agent?.id ?? null,
            agentType: agent?.type ?? null,
            threadId: threadFor(agent, null, newId)
          }
          messageId = yield* repo.open({
            id: target.id,
            organizationId,
            conversationId: state.conversation_id,
            contactId: input.from,
            contactName: input.contact?.name ?? null,
            threadId: target.threadId,
            agentId: target.agentId,
            metadata,
            message,
            traceContext,
            newId: newId
          })
          createdSession = true
        } else {
          if (input.metadata !== undefined) {
            const current = JSON.parse(state.metadata ?? "{}") as JsonObject
            const before = JSON.stringify(current)
            const metadata = yield* patchMetadata(current, input.metadata)
            // A patch that changes nothing writes nothing (members keep their place when replaced).
            if (JSON.stringify(metadata) !== before) yield* sessions.setMetadata(organizationId, target.id, metadata)
          }
          if (requested !== undefined && (requested?.id ?? null) !== target.agentId) {
            const assigned = yield* sessions.assignAgent({ organizationId, ...target }, requested)
            target = {
              id: target.id,
              agentId: assigned.agentId,
              agentType: requested?.type ?? null,
              threadId: assigned.threadId
            }
          }
          if (message !== undefined) {
            // The session is locked open: the insert always succeeds.
            yield* repo.insertMessage(organizationId, target.id, message, newId(), traceContext)
            messageId = message.id
          }
        }
        if (mode === "close") yield* close(organizationId, target.id)
        else if (message !== undefined) yield* replyIfAi(organizationId, target, message, state.reply_debounce_seconds)
        return responseOf(state.conversation_id, target.id, messageId, state.conversation_created, createdSession)
      })

      const ingest = Effect.fn("Ingest.ingest")(
        function* (organizationId: string, input: IngestPayload) {
          const content = input.content == null ? undefined : yield* validateContent(input.content)
          const mode = input.session ?? "continue"
          const channelType = input.channel_type ?? DEFAULT_CHANNEL_TYPE
          const editOf = content === undefined ? null : (input.edit_of_provider_message_id ?? null)
          if (
            editOf !== null &&
            (mode !== "continue" || input.agent_id !== undefined || input.metadata !== undefined)
          ) {
            return yield* ValidationFailed.one(
              ["body", "edit_of_provider_message_id"],
              "An edit cannot be combined with agent_id, metadata or a session other than continue"
            )
          }
          const message: Incoming | undefined =
            content === undefined
              ? undefined
              : {
                  id: newId(),
                  role: input.role ?? "user",
                  content,
                  providerMessageId: input.provider_message_id ?? null,
                  repliedProviderMessageId: input.replied_provider_message_id ?? null,
                  triggersReply: editOf === null && !isReaction(content)
                }
          // A plain message to the open session is stored by the step itself (one statement); a
          // reaction or an edit also changes the message it names, off that hot path (D24).
          const append =
            message?.triggersReply === true &&
            mode === "continue" &&
            input.agent_id === undefined &&
            input.metadata === undefined
          const newSessionId = newId()
          const traceContext = yield* currentTraceContext
          // The contact's conversation may be deleted (D21, D22) between the step's read and its insert.
          return yield* retryWhileReferenceDeleted(
            repo.withTransaction(
              Effect.gen(function* () {
                yield* repo.lock(organizationId, channelType, input.to, input.from)
                const state = yield* repo.step({
                  organizationId,
                  contactId: input.from,
                  channelType,
                  channelTo: input.to,
                  contactName: input.contact?.name ?? null,
                  contactPhone: input.contact?.phone ?? null,
                  message,
                  append,
                  reuseOpen: mode !== "new",
                  newSessionId,
                  // An id that is not a UUID names no agent: AgentNotFound below, after the D10 check.
                  requestedAgentId:
                    typeof input.agent_id === "string" && isUuid(input.agent_id) ? input.agent_id : null,
                  traceContext,
                  newId: newId
                })
                if (state.duplicate_message_id !== null) {
                  // D10: the first call's ids; nothing was written.
                  return responseOf(
                    state.conversation_id,
                    state.duplicate_session_id,
                    state.duplicate_message_id,
                    false,
                    false
                  )
                }
                if (state.message_id !== null && state.session_id !== null && message !== undefined) {
                  const target = {
                    id: state.session_id,
                    agentId: state.agent_id,
                    agentType: state.agent_type,
                    threadId: state.thread_id
                  }
                  yield* replyIfAi(organizationId, target, message, state.reply_debounce_seconds)
                  return responseOf(state.conversation_id, state.session_id, state.message_id, false, false)
                }
                if (editOf !== null && message !== undefined) {
                  // D24: an edit of a message of the conversation changes it, and stores nothing else.
                  const edited = yield* messages.referenced(organizationId, state.conversation_id, editOf)
                  if (edited !== undefined) {
                    yield* messages.edit(organizationId, edited.id, message.content)
                    if (message.providerMessageId !== null) {
                      yield* repo.retargetReceipt(
                        organizationId,
                        state.conversation_id,
                        message.providerMessageId,
                        edited.id,
                        edited.session_id
                      )
                    }
                    return responseOf(
                      state.conversation_id,
                      edited.session_id,
                      edited.id,
                      state.conversation_created,
                      false
                    )
                  }
                }
                if (message !== undefined && isReaction(message.content)) {
                  // D24: the reaction's target by Parley id or the channel's id; stored with its Parley id when found.
                  const reacted = yield* messages.referenced(
                    organizationId,
                    state.conversation_id,
                    String(message.content.message_id)
                  )
                  const reaction: Incoming =
                    reacted === undefined
                      ? message
                      : { ...message, content: { ...message.content, message_id: reacted.id } as Content }
                  const response = yield* control(
                    organizationId,
                    input,
                    mode,
                    reaction,
                    newSessionId,
                    state,
                    traceContext
                  )
                  if (reacted !== undefined)
                    yield* messages.react(organizationId, reacted.id, reaction.role, String(message.content.emoji))
                  return response
                }
                return yield* control(organizationId, input, mode, message, newSessionId, state, traceContext)
              })
            )
          )
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Ingest.of({ ingest })
    })
  )

  /** The service over its PostgreSQL repository (`IngestRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Ingest.layerNoDeps.pipe(Layer.provide(IngestRepo.layer))
}
