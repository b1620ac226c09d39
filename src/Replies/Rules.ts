/**
 * The rules of replies that live in TypeScript, pure and in one place
 * (DECISIONS.md D7, R1; issue 13 item 2): who may be answered, and when a
 * triggered reply is due.
 */
import { SessionNotFound, SessionNotOpen } from "../Domain/Errors.ts"
import { SessionAgentNotAi, SessionHasNoAgent, SessionHasNoThread } from "./Errors.ts"

/** What D7 checks of a session: its status, agent, agent's type and thread. */
export interface ReplyState {
  readonly status: string
  readonly agent_id: string | null
  readonly agent_type: string | null
  readonly thread_id: string | null
}

/** Why a reply is refused (D1, D7). */
export type ReplyRefusal = SessionNotFound | SessionNotOpen | SessionHasNoAgent | SessionAgentNotAi | SessionHasNoThread

/**
 * D7: whether a session can be answered, checked in this order: not in the
 * organization (`state` undefined; SessionNotFound 404), not open
 * (SessionNotOpen 400), no agent (SessionHasNoAgent 400), an agent that is not
 * AI (SessionAgentNotAi 400), no thread (SessionHasNoThread 400). Answers the
 * first refusal, or undefined when the reply may go ahead. The one owner of
 * this rule: `RepliesRepo.reply` triggers the job in the same statement only
 * for the state this function accepts (open, an AI agent, a thread).
 */
export const replyRefusal = (state: ReplyState | undefined): ReplyRefusal | undefined => {
  if (state === undefined) return new SessionNotFound()
  if (state.status !== "open") return new SessionNotOpen()
  if (state.agent_id === null) return new SessionHasNoAgent()
  if (state.agent_type !== "ai") return new SessionAgentNotAi()
  if (state.thread_id === null) return new SessionHasNoThread()
  return undefined
}

/** Triggers due sooner than this (ms from now) NOTIFY the workers; later ones are found by their 1 s poll. */
export const NOTIFY_WITHIN_MS = 1_500

/**
 * R1 trailing debounce: a trigger at `nowMs` (epoch ms) with `debounceSeconds`
 * makes the session's job due at `nowMs + debounceSeconds * 1000`, replacing
 * the due time of a job still pending; `notify` says whether the workers are
 * woken at commit (due within {@link NOTIFY_WITHIN_MS}).
 */
export const replyDue = (
  nowMs: number,
  debounceSeconds: number
): { readonly dueAt: Date; readonly notify: boolean } => {
  const debounceMs = debounceSeconds * 1000
  return { dueAt: new Date(nowMs + debounceMs), notify: debounceMs < NOTIFY_WITHIN_MS }
}
