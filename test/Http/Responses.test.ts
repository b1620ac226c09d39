/**
 * Responses written past the HttpApi encoder (issue 37 item 4): where a
 * handler sends JSON text that PostgreSQL built (`jsonText`, `Domain/Common.ts`
 * `JsonText`) or rows streamed as a JSON array (`jsonArrayStream`), no schema
 * encodes the body on its way out, so nothing but this test holds it to the
 * endpoint's documented success schema. Each such operation is called here and
 * its body decoded with that schema, every member known (`onExcessProperty:
 * "error"`). The operations are found by reading the handlers (`src/*\/Http.ts`),
 * so a new handler of this kind without a case here fails the first test.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ParleyApi } from "../../src/Api.ts"
import { ADMIN_TOKEN, TestApi, type TestOrganization, type TestResponse, withApp } from "../support/TestApp.ts"

const src = path.resolve(import.meta.dirname, "../../src")

/** `group.endpoint` of every handler whose body calls `jsonText(` or `jsonArrayStream(`. */
const rawHandlers = (): Array<string> =>
  fs
    .readdirSync(src, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(src, entry.name, "Http.ts")))
    .flatMap((entry) => {
      const text = fs.readFileSync(path.join(src, entry.name, "Http.ts"), "utf8")
      return [...text.matchAll(/HttpApiBuilder\.group\(\s*ParleyApi,\s*"(\w+)"[\s\S]*?(?=HttpApiBuilder\.group\(|$)/g)]
        .flatMap((group) => {
          const keys = [...group[0].matchAll(/^ {6}(\w+): /gm)]
          return keys.map((key, i) => ({
            name: `${group[1]}.${key[1]}`,
            body: group[0].slice(key.index, keys[i + 1]?.index ?? group[0].length)
          }))
        })
        .filter(({ body }) => /\b(jsonText|jsonArrayStream)\(/.test(body))
        .map(({ name }) => name)
    })
    .sort()

/** The endpoint's one success schema, from the contract (`src/Api.ts`). */
const successSchema = (operation: string): Schema.Top => {
  const [group, endpoint] = operation.split(".") as [string, string]
  const groups = ParleyApi.groups as unknown as Record<
    string,
    { readonly endpoints: Record<string, { readonly success: ReadonlySet<Schema.Top> }> }
  >
  const schemas = [...groups[group]!.endpoints[endpoint]!.success]
  assert.lengthOf(schemas, 1, operation)
  return schemas[0]!
}

/** Decodes `body` with the operation's success schema, no member unknown; throws with every issue. */
const assertShape = (operation: string, response: TestResponse) => {
  assert.isTrue(response.status >= 200 && response.status < 300, `${operation}: ${response.status} ${response.text}`)
  Schema.decodeUnknownSync(successSchema(operation) as Schema.Codec<unknown, unknown>, {
    onExcessProperty: "error",
    errors: "all"
  })(response.body)
}

/** A public address literal: accepted by the W6 guard without DNS. */
const PUBLIC_URL = "https://93.184.215.14/hooks/parley"

interface Fixture {
  readonly api: TestApi["Service"]
  readonly org: TestOrganization
  readonly session: any
  readonly appId: string
}

/**
 * One call of each operation, in this order (a message before the listings
 * that show it), returning its response; the fixture's session has an AI
 * agent and a thread, and the app is subscribed to message.created.
 */
const calls: Record<string, (fx: Fixture) => Effect.Effect<TestResponse>> = {
  "messages.create": ({ org, session }) =>
    org.call("POST", `/sessions/${session.id}/messages`, { role: "user", content: { type: "text", text: "Hi" } }),
  "ingest.ingest": ({ org }) =>
    org.call("POST", "/ingest", {
      to: "+4930123456",
      from: "+4915112345678",
      contact: { name: "Ada" },
      content: { type: "text", text: "Hi" },
      provider_message_id: "wamid.shape"
    }),
  "replies.reply": ({ org, session }) => org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 60 }),
  "replies.schedule": ({ org, session }) =>
    org.call("POST", `/sessions/${session.id}/schedule`, {
      scheduled_for: "2100-01-01T00:00:00Z",
      config: { type: "node", node_id: "later" }
    }),
  "replies.listSchedules": ({ org, session }) => org.call("GET", `/sessions/${session.id}/schedules`),
  "apps.listDeliveries": ({ api, org, appId }) =>
    api.request("GET", `/admin/v1/organizations/${org.id}/apps/${appId}/deliveries`, { token: ADMIN_TOKEN }),
  "export.sessionsBatch": ({ org, session }) => org.call("GET", `/data/sessions/batch?session_ids=${session.id}`),
  "export.sessions": ({ org }) => org.call("GET", "/data/sessions?limit=10"),
  "export.messages": ({ org }) => org.call("GET", "/data/messages?limit=10")
}

describe("responses built past the encoder (issue 37 item 4)", () => {
  withApp()((it) => {
    it.effect("every handler sending jsonText or jsonArrayStream has a case here", () =>
      Effect.sync(() => assert.deepStrictEqual(rawHandlers(), Object.keys(calls).sort()))
    )

    it.effect("each such response decodes with its endpoint's success schema, no member unknown", () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const app = yield* api.request("POST", `/admin/v1/organizations/${org.id}/apps`, {
          token: ADMIN_TOKEN,
          body: { name: "shapes", webhook_url: PUBLIC_URL, events: ["message.created"] }
        })
        assert.strictEqual(app.status, 201, app.text)
        const session = yield* org.session({ agent_id: yield* org.agent("ai") })
        const fx: Fixture = { api, org, session, appId: app.body.id }
        for (const operation of Object.keys(calls)) {
          const response = yield* calls[operation]!(fx)
          assertShape(operation, response)
          // An empty list proves nothing of the members: every list here has a row by now.
          if (Array.isArray(response.body)) assert.isAbove(response.body.length, 0, operation)
        }
      })
    )
  })
})
