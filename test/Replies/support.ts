/**
 * Fixtures for reply and runtime tests: an organization whose AI agent answers
 * from a published assistant, a session with that agent, and readers of the
 * runs and messages the runtime wrote.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { assistantFixture } from "../support/Assistants.ts"
import { ADMIN_TOKEN, type TestOrganization } from "../support/TestApp.ts"
import { waitFor } from "../support/Wait.ts"

export { snapshotOf } from "../support/AssistantItems.ts"
export { realSleep, waitFor } from "../support/Wait.ts"

/**
 * An organization with an assistant holding `snapshot`, published on main
 * (R2 reads main's HEAD), an AI agent for it, and `session()` making sessions
 * with that agent.
 */
export const aiFixture = (snapshot: Record<string, unknown>) =>
  Effect.gen(function* () {
    const assistant = yield* assistantFixture({ snapshot })
    const commit = yield* assistant.publish()
    const org: TestOrganization = assistant.org
    const agent = yield* assistant.api.request("POST", `/admin/v1/organizations/${org.id}/agents`, {
      token: ADMIN_TOKEN,
      body: { name: "Bot", type: "ai", assistant_id: assistant.id }
    })
    if (agent.status !== 201) throw new Error(`agent create failed: ${agent.text}`)
    const agentId: string = agent.body.id
    const session = (fields: Record<string, unknown> = {}) => org.session({ agent_id: agentId, ...fields })
    return { ...assistant, org, commit, agentId, session }
  })

/** The runs of a session, oldest first. */
export const runsOf = (sessionId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{
      id: string
      trigger: string
      commit_id: string | null
      nodes: Array<string>
      model: string | null
      input_tokens: number | null
      output_tokens: number | null
      status: string
      error: string | null
      duration_ms: number
    }>`SELECT id, trigger, commit_id, nodes, model, input_tokens, output_tokens, status, error, duration_ms
       FROM runs WHERE session_id = ${sessionId} ORDER BY started_at, id`
  })

/** The messages of a session through the API, oldest first. */
export const messagesOf = (org: TestOrganization, sessionId: string) =>
  org
    .call("POST", `/sessions/${sessionId}/messages/search`, { session_id: sessionId, limit: 1000 })
    .pipe(Effect.map((response) => response.body as Array<any>))

/**
 * One recorded run (A15, A16): the user's `text` in session `sessionId` of
 * `fx.org`, then a reply with no debounce, waited for until its run
 * succeeded.
 */
export const recordTurn = (
  fx: { readonly org: { readonly call: TestOrganization["call"] } },
  sessionId: string,
  text: string
) =>
  Effect.gen(function* () {
    const before = (yield* runsOf(sessionId)).length
    yield* fx.org.call("POST", `/sessions/${sessionId}/messages`, { role: "user", content: { type: "text", text } })
    const reply = yield* fx.org.call("POST", `/sessions/${sessionId}/reply`, { debounce_time: 0 })
    assert.strictEqual(reply.status, 200, reply.text)
    const runs = yield* waitFor(runsOf(sessionId), (rows) => rows.length === before + 1)
    assert.strictEqual(runs.at(-1)!.status, "succeeded", runs.at(-1)!.error ?? "")
  })
