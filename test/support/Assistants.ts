/**
 * Helpers for assistant tests over HTTP: an organization with an assistant, and
 * calls under the assistants base path (the test app and its database). The
 * item builders are in `AssistantItems.ts`, the fixture over the domain's
 * services with no HTTP in `AssistantFixture.ts`.
 */
import { Effect } from "effect"
import { assistantsBasePath } from "../../src/Domain/BasePaths.ts"
import { ADMIN_TOKEN, TestApi, type TestResponse } from "./TestApp.ts"

export { llm, tool } from "./AssistantItems.ts"

/** The assistants base path (O4). */
export const A = assistantsBasePath

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
