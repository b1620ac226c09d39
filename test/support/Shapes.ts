/**
 * Exact-shape checks: a body must decode with the contract's schema and carry
 * no member the schema does not declare (the JSON built by PostgreSQL must equal
 * the documented shapes).
 */
import { Schema } from "effect"
import { Agent } from "../../src/Domain/Agent.ts"
import { Message } from "../../src/Domain/Message.ts"
import { Session } from "../../src/Domain/Session.ts"

const strict = { onExcessProperty: "error", errors: "all" } as const

/** Fails unless `body` is exactly a Session (spec "Session"). */
export const assertSession = (body: unknown) => Schema.decodeUnknownSync(Session, strict)(body)

/** Fails unless `body` is exactly a Message (spec "Message"). */
export const assertMessage = (body: unknown) => Schema.decodeUnknownSync(Message, strict)(body)

/** Fails unless `body` is exactly an Agent (spec "Agent"). */
export const assertAgent = (body: unknown) => Schema.decodeUnknownSync(Agent, strict)(body)

/** ISO 8601 UTC with microseconds, as Parley writes every timestamp. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/
