/**
 * The baseline of the messages benchmark (and of the ingest benchmark, see
 * the /ingest route): POST message on Fastify +
 * postgres.js with prepared statements, doing per request the same work as
 * Parley: bearer token -> sha256 -> the API-key lookup; minimal body
 * validation; the same insert statement (message + message.created event in
 * one CTE, JSON built by PostgreSQL); 201 with the database's JSON text, 404 /
 * 400 when the session is missing / not open. Pool of 20 like Parley.
 *
 * `DATABASE_URL=... PORT=8081 node bench/baseline/server.ts`
 */
import { createHash, randomBytes } from "node:crypto"
import Fastify, { type FastifyReply } from "fastify"
import postgres from "postgres"
import { v7 as uuidv7 } from "uuid"
import {
  apiKeyLookupSql,
  deliveriesChannel,
  ingestLockStatement,
  ingestOpenStatement,
  ingestStepStatement,
  insertMessageStatement
} from "./sql.ts"

/** Connections in the pool, as Parley's src/Database/Database.ts POOL_SIZE. */
const POOL_SIZE = 20

const databaseUrl = process.env.DATABASE_URL
if (databaseUrl === undefined || databaseUrl === "") {
  process.stderr.write("DATABASE_URL is required\n")
  process.exit(1)
}
const port = Number(process.env.PORT ?? "8081")
const host = process.env.HOST ?? "127.0.0.1"

const sql = postgres(databaseUrl, {
  max: POOL_SIZE,
  prepare: true,
  idle_timeout: 60,
  connect_timeout: 10,
  connection: { application_name: "parley-baseline" },
  onnotice: () => undefined
})

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const detail = (reply: FastifyReply, status: number, text: unknown) => reply.code(status).send({ detail: text })

const invalid = (reply: FastifyReply, loc: Array<string>, msg: string) =>
  detail(reply, 422, [{ loc: ["body", ...loc], msg, type: "value_error" }])

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const optionalId = (value: unknown): value is string | null | undefined =>
  value === undefined || value === null || typeof value === "string"

const app = Fastify({ logger: false, bodyLimit: 1_048_576 })

app.get("/readyz", async () => {
  await sql`SELECT 1`
  return { status: "ready" }
})

app.post<{ Params: { session_id: string }; Body: unknown }>(
  "/conversations/v2/api/v1/sessions/:session_id/messages",
  async (request, reply) => {
    const authorization = request.headers.authorization ?? ""
    const token = authorization.startsWith("Bearer ") ? authorization.slice(7) : ""
    if (token.length === 0 || token.length > 512) return detail(reply, 401, "Invalid or expired token")
    const tokenHash = createHash("sha256").update(token, "utf8").digest()
    const keys = await sql.unsafe<Array<{ organization_id: string }>>(apiKeyLookupSql, [tokenHash], { prepare: true })
    const organizationId = keys[0]?.organization_id
    if (organizationId === undefined) return detail(reply, 401, "Invalid or expired token")

    const body = request.body
    if (!isObject(body)) return invalid(reply, [], "Expected an object")
    const { content, role } = body
    if (role !== "user" && role !== "assistant") return invalid(reply, ["role"], "Expected user or assistant")
    if (!isObject(content)) return invalid(reply, ["content"], "Expected an object")
    if (content.type !== "text") return detail(reply, 400, "Invalid content type")
    if (typeof content.text !== "string" || content.text.length === 0) {
      return invalid(reply, ["content", "text"], "Expected a non-empty string")
    }
    const { provider_message_id, replied_provider_message_id, run_id } = body
    if (!optionalId(provider_message_id) || !optionalId(replied_provider_message_id) || !optionalId(run_id)) {
      return invalid(reply, [], "Expected string identifiers")
    }

    const sessionId = request.params.session_id
    if (!UUID.test(sessionId)) return detail(reply, 404, "Session not found")
    const rows = await sql.unsafe<Array<{ status: string; body: string | null; subscribed: boolean }>>(
      insertMessageStatement.text,
      insertMessageStatement.values({
        sessionId,
        organizationId,
        messageId: uuidv7(),
        role,
        content: JSON.stringify({ type: "text", text: content.text }),
        providerMessageId: provider_message_id ?? null,
        repliedProviderMessageId: replied_provider_message_id ?? null,
        replyToMessageId: null,
        runId: run_id ?? null,
        metadata: "{}",
        eventId: uuidv7(),
        traceContext: null
      }) as Array<any>,
      { prepare: true }
    )
    const row = rows[0]
    // No delivery worker in this process: wake the others, as a Parley process with PARLEY_ROLE=api does (O11).
    if (row?.body != null && row.subscribed) await sql.unsafe(`SELECT pg_notify('${deliveriesChannel}', '')`)
    if (row === undefined) return detail(reply, 404, "Session not found")
    if (row.body === null) return detail(reply, 400, "Session is not open")
    return reply.code(201).header("content-type", "application/json").send(row.body)
  }
)

interface IngestStepRow {
  readonly conversation_id: string
  readonly conversation_created: boolean
  readonly session_id: string | null
  readonly message_id: string | null
  readonly duplicate_message_id: string | null
  readonly duplicate_session_id: string | null
  readonly default_agent_id: string | null
  readonly default_agent_type: string | null
  readonly subscribed: boolean
}

const isIdentifier = (value: unknown): value is string =>
  typeof value === "string" && value.length > 0 && value.length <= 255

/**
 * POST /ingest for the ingest benchmark: a text message with `session`
 * `continue` (what the benchmark sends), the same work as Parley in one
 * transaction with the same statements: the pair's advisory lock, the step
 * (contact, conversation, open session, receipt claim, message to the open
 * session), and when no session is open a new one with the message. No reply
 * job (the benchmark's organization has no agent); other modes respond 422.
 */
app.post<{ Body: unknown }>("/conversations/v2/api/v1/ingest", async (request, reply) => {
  const authorization = request.headers.authorization ?? ""
  const token = authorization.startsWith("Bearer ") ? authorization.slice(7) : ""
  if (token.length === 0 || token.length > 512) return detail(reply, 401, "Invalid or expired token")
  const tokenHash = createHash("sha256").update(token, "utf8").digest()
  const keys = await sql.unsafe<Array<{ organization_id: string }>>(apiKeyLookupSql, [tokenHash], { prepare: true })
  const organizationId = keys[0]?.organization_id
  if (organizationId === undefined) return detail(reply, 401, "Invalid or expired token")

  const body = request.body
  if (!isObject(body)) return invalid(reply, [], "Expected an object")
  const { to, from, content, contact } = body
  if (!isIdentifier(to)) return invalid(reply, ["to"], "Expected an identifier")
  if (!isIdentifier(from)) return invalid(reply, ["from"], "Expected an identifier")
  const channelType = body.channel_type ?? "whatsapp"
  if (!isIdentifier(channelType)) return invalid(reply, ["channel_type"], "Expected an identifier")
  const role = body.role ?? "user"
  if (role !== "user" && role !== "assistant") return invalid(reply, ["role"], "Expected user or assistant")
  if ((body.session ?? "continue") !== "continue") return invalid(reply, ["session"], "Only continue here")
  if (!isObject(content)) return invalid(reply, ["content"], "Expected an object")
  if (content.type !== "text") return detail(reply, 400, "Invalid content type")
  if (typeof content.text !== "string" || content.text.length === 0) {
    return invalid(reply, ["content", "text"], "Expected a non-empty string")
  }
  const providerMessageId = body.provider_message_id ?? null
  if (providerMessageId !== null && !isIdentifier(providerMessageId)) {
    return invalid(reply, ["provider_message_id"], "Expected an identifier")
  }
  const repliedProviderMessageId = body.replied_provider_message_id ?? null
  if (repliedProviderMessageId !== null && !isIdentifier(repliedProviderMessageId)) {
    return invalid(reply, ["replied_provider_message_id"], "Expected an identifier")
  }
  if (contact !== undefined && contact !== null && !isObject(contact))
    return invalid(reply, ["contact"], "Expected an object")
  const name = contact?.name ?? null
  const phone = contact?.phone ?? null
  if ((name !== null && typeof name !== "string") || (phone !== null && typeof phone !== "string")) {
    return invalid(reply, ["contact"], "Expected strings")
  }

  const messageId = uuidv7()
  const newSessionId = uuidv7()
  const contentText = JSON.stringify({ type: "text", text: content.text })
  // Parley stores the trace context of its request span with the events (W4).
  const traceContext = JSON.stringify({
    traceparent: `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`
  })
  const result = await sql.begin(async (tx) => {
    await tx.unsafe(
      ingestLockStatement.text,
      ingestLockStatement.values({ organizationId, channelType, channelTo: to, contactId: from }) as Array<any>,
      { prepare: true }
    )
    const [state] = await tx.unsafe<Array<IngestStepRow>>(
      ingestStepStatement.text,
      ingestStepStatement.values({
        organizationId,
        contactId: from,
        channelType,
        channelTo: to,
        conversationId: uuidv7(),
        conversationEventId: uuidv7(),
        contactName: name,
        contactPhone: phone,
        providerMessageId,
        repliedProviderMessageId,
        messageId,
        newSessionId,
        reuseOpen: true,
        role,
        content: contentText,
        append: true,
        messageEventId: uuidv7(),
        requestedAgentId: null,
        traceContext
      }) as Array<any>,
      { prepare: true }
    )
    if (state === undefined) throw new Error("ingest step returned no row")
    // As Parley's ingest: the delivery workers are woken by a statement of their own (O11).
    if (state.subscribed) await tx.unsafe(`SELECT pg_notify('${deliveriesChannel}', '')`)
    if (state.duplicate_message_id !== null) {
      return [state.conversation_id, state.duplicate_session_id, state.duplicate_message_id, false, false] as const
    }
    if (state.message_id !== null)
      return [state.conversation_id, state.session_id, state.message_id, false, false] as const
    const [opened] = await tx.unsafe<Array<{ subscribed: boolean }>>(
      ingestOpenStatement.text,
      ingestOpenStatement.values({
        sessionId: newSessionId,
        organizationId,
        conversationId: state.conversation_id,
        contactId: from,
        contactName: name,
        threadId: state.default_agent_type === "ai" ? uuidv7() : null,
        agentId: state.default_agent_id,
        metadata: "{}",
        sessionEventId: uuidv7(),
        messageId,
        role,
        content: contentText,
        providerMessageId,
        repliedProviderMessageId,
        messageEventId: uuidv7(),
        traceContext
      }) as Array<any>,
      { prepare: true }
    )
    if (opened?.subscribed === true) await tx.unsafe(`SELECT pg_notify('${deliveriesChannel}', '')`)
    return [state.conversation_id, newSessionId, messageId, state.conversation_created, true] as const
  })
  const [conversation_id, session_id, message_id, created_conversation, created_session] = result
  return reply
    .code(200)
    .header("content-type", "application/json")
    .send(JSON.stringify({ conversation_id, session_id, message_id, created_conversation, created_session }))
})

const shutdown = async () => {
  await app.close()
  await sql.end({ timeout: 5 })
  process.exit(0)
}
process.once("SIGTERM", shutdown)
process.once("SIGINT", shutdown)

await app.listen({ port, host })
