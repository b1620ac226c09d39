/**
 * The rules of replies that live in TypeScript, pure and in one place
 * (DECISIONS.md D7, R1; issue 13 item 2): who may be answered, and when a
 * triggered reply is due.
 */
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
import { SessionAgentNotAi, SessionHasNoAgent, SessionHasNoThread } from "./Errors.ts"

/** What D7 checks of a session: its status, agent, agent's type and thread. */
export interface ReplyState {
  readonly status: string
  readonly agent_id: string | null
  readonly agent_type: string | null
  readonly thread_id: string | null
}

/** The marker of a check that a column is set, whatever its value (see {@link replyRefusal}). */
const NOT_NULL = "\u0000not null"

/** Why a reply is refused (D1, D7). */
export type ReplyRefusal = SessionNotFound | SessionNotOpen | SessionHasNoAgent | SessionAgentNotAi | SessionHasNoThread

/**
 * D7's checks of a session found in the organization, in the order they are
 * made: each a column of {@link ReplyState}, the value it must have (or
 * {@link NOT_NULL}) and the refusal when it does not. The one definition of
 * the rule: {@link replyRefusal} walks it in TypeScript, {@link replyAcceptedSql}
 * writes it as the SQL condition under which `RepliesRepo.reply` triggers the
 * job in the same statement (R1; the hot path of `npm run bench -- replies`).
 */
const D7_CHECKS: ReadonlyArray<{
  readonly column: keyof ReplyState
  readonly is: string
  readonly refusal: () => ReplyRefusal
}> = [
  { column: "status", is: "open", refusal: () => new SessionNotOpen() },
  { column: "agent_id", is: NOT_NULL, refusal: () => new SessionHasNoAgent() },
  { column: "agent_type", is: "ai", refusal: () => new SessionAgentNotAi() },
  { column: "thread_id", is: NOT_NULL, refusal: () => new SessionHasNoThread() }
]

/**
 * D7: whether a session can be answered, checked in this order: not in the
 * organization (`state` undefined; SessionNotFound 404), not open
 * (SessionNotOpen 400), no agent (SessionHasNoAgent 400), an agent that is not
 * AI (SessionAgentNotAi 400), no thread (SessionHasNoThread 400). Returns the
 * first refusal, or undefined when the reply may go ahead.
 */
export const replyRefusal = (state: ReplyState | undefined): ReplyRefusal | undefined => {
  if (state === undefined) return new SessionNotFound()
  const failed = D7_CHECKS.find(({ column, is }) => (is === NOT_NULL ? state[column] === null : state[column] !== is))
  return failed?.refusal()
}

/**
 * The SQL condition, over the row `alias` with the columns of
 * {@link ReplyState}, that holds exactly when {@link replyRefusal} accepts the
 * state: the same checks, written from {@link D7_CHECKS}.
 */
export const replyAcceptedSql = (alias: string): string =>
  D7_CHECKS.map(({ column, is }) =>
    is === NOT_NULL ? `${alias}.${column} IS NOT NULL` : `${alias}.${column} = '${is}'`
  ).join(" AND ")

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
