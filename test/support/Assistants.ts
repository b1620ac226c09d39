/**
 * Helpers for assistant tests: an organization with an assistant, and calls
 * under the assistants base path.
 */
import { Effect } from "effect"
import { ADMIN_TOKEN, TestApi, type TestResponse } from "./TestApp.ts"

/** The assistants base path (O4). */
export const A = "/assistants/api/v2"

/** A node of type llm with the given config. */
export const llm = (id: string, config: Record<string, unknown> = {}) => ({
  id,
  name: `Node ${id}`,
  type: "llm" as const,
  config: { instructions: `You are ${id}`, ...config }
})

/** A tool called `name`. */
export const tool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `Tool ${name}`,
  request: { url: "https://example.com/tools", method: "POST" },
  ...extra
})

/** An organization with an assistant and a client of its assistants API. */
export const assistantFixture = (body: Record<string, unknown> = {}) =>
  Effect.gen(function* () {
    const api = yield* TestApi
    const org = yield* api.organization()
    const created = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
      token: ADMIN_TOKEN,
      body: { name: "Support bot", ...body }
    })
    if (created.status !== 201) throw new Error(`assistant create failed: ${created.text}`)
    const id: string = created.body.id
    const call = (method: string, path: string, payload?: unknown): Effect.Effect<TestResponse> =>
      api.request(method, `${A}/assistants/${id}${path}`, {
        token: org.token,
        ...(payload !== undefined ? { body: payload } : {})
      })
    const draft = (branch: string) => `/branches/${encodeURIComponent(branch)}/draft`
    const publish = (branch = "main", message = "publish") =>
      call("POST", `/branches/${encodeURIComponent(branch)}/publish`, { message }).pipe(
        Effect.map((response) => {
          if (response.status !== 200) throw new Error(`publish failed: ${response.text}`)
          return response.body.commit
        })
      )
    return { api, org, id, created: created.body, call, draft, publish }
  })
