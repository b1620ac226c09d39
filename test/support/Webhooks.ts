/**
 * Webhook apps for tests over the in-process app (`TestApp.ts`): create one
 * through the admin API, list its deliveries (O6).
 */
import { Effect } from "effect"
import { ADMIN_TOKEN, type TestApi, type TestOrganization } from "./TestApp.ts"

/** Creates an app of `org` (`name` defaults to "integration") with `body`; returns the App, or throws unless 201. */
export const createApp = (api: TestApi["Service"], org: TestOrganization, body: Record<string, unknown>) =>
  api
    .request("POST", `/admin/v1/organizations/${org.id}/apps`, {
      token: ADMIN_TOKEN,
      body: { name: "integration", ...body }
    })
    .pipe(
      Effect.map((response) => {
        if (response.status !== 201) throw new Error(`app create failed: ${response.status} ${response.text}`)
        return response.body
      })
    )

/** The app's deliveries, newest first; `query` is appended as is (`?status=failed`). */
export const listDeliveries = (api: TestApi["Service"], org: TestOrganization, appId: string, query = "") =>
  api
    .request("GET", `/admin/v1/organizations/${org.id}/apps/${appId}/deliveries${query}`, { token: ADMIN_TOKEN })
    .pipe(Effect.map((response) => response.body as Array<any>))
