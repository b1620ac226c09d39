/**
 * The baseline of the messages benchmark: POST message on Fastify +
 * postgres.js with prepared statements, doing per request the same work as
 * Parley: bearer token -> sha256 -> the API-key lookup; minimal body
 * validation; the same insert statement (message + message.created event in
 * one CTE, JSON built by PostgreSQL); 201 with the database's JSON text, 404 /
 * 400 when the session is missing / not open. Pool of 20 like Parley.
 *
 * `DATABASE_URL=... PORT=8081 node bench/baseline/server.ts`
 */
import { createHash } from "node:crypto"
import Fastify, { type FastifyReply } from "fastify"
import postgres from "postgres"
import { v7 as uuidv7 } from "uuid"
import { apiKeyLookupSql, insertMessageSql } from "./sql.ts"

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
    const rows = await sql.unsafe<Array<{ status: string; body: string | null }>>(
      insertMessageSql,
      [
        sessionId,
        organizationId,
        uuidv7(),
        role,
        JSON.stringify({ type: "text", text: content.text }),
        provider_message_id ?? null,
        replied_provider_message_id ?? null,
        run_id ?? null,
        "{}",
        uuidv7()
      ],
      { prepare: true }
    )
    const row = rows[0]
    if (row === undefined) return detail(reply, 404, "Session not found")
    if (row.body === null) return detail(reply, 400, "Session is not open")
    return reply.code(201).header("content-type", "application/json").send(row.body)
  }
)

const shutdown = async () => {
  await app.close()
  await sql.end({ timeout: 5 })
  process.exit(0)
}
process.once("SIGTERM", shutdown)
process.once("SIGINT", shutdown)

await app.listen({ port, host })
