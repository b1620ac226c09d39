/**
 * The typed clients of the contract (issue 14 "Typed clients"): `parley/client`
 * (an `HttpApiClient` of `ParleyApi` with the API key and the admin token
 * each sent where they belong) and `parley/webhooks` (a Standard Webhooks
 * verifier returning the typed event of W1/W3). Both import no server code,
 * and resolve by the package's name from a plain Node process.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { Webhook } from "standardwebhooks"
import { makeClient, withIdempotencyKey } from "../../src/client.ts"
import { eventTypes } from "../../src/Domain/EventType.ts"
import { conversationOf, verifyWebhook, WebhookVerificationError } from "../../src/Webhooks/Receiver.ts"
import { snapshotOf } from "../support/AssistantItems.ts"
import { A, llm } from "../support/Assistants.ts"
import { root, runNode } from "../support/Processes.ts"
import { eventually, receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, TestApi, withApp, withWorkers } from "../support/TestApp.ts"

withApp()("parley/client", (test) => {
  test.effect(
    "makeClient: the API key goes to the conversations API, the admin token to /admin/v1; errors decode by tag (D1)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const parley = yield* makeClient({ baseUrl: api.baseUrl, apiKey: org.token, adminToken: ADMIN_TOKEN })
        const session = yield* parley.sessions.create({ payload: { contact_id: "+15550100", contact_name: "Ada" } })
        assert.strictEqual(session.organization_id, org.id)
        const message = yield* parley.messages.create({
          params: { session_id: session.id },
          payload: { role: "user", content: { type: "text", text: "Hello" } }
        })
        assert.deepStrictEqual(message.content, { type: "text", text: "Hello" })
        const organization = yield* parley.admin.getOrganization({ params: { org_id: org.id } })
        assert.strictEqual(organization.id, org.id)
        const missing = yield* Effect.flip(parley.sessions.get({ params: { session_id: crypto.randomUUID() } }))
        assert.strictEqual(missing._tag, "SessionNotFound")

        const anonymous = yield* makeClient({ baseUrl: api.baseUrl })
        const refused = yield* Effect.flip(anonymous.sessions.get({ params: { session_id: session.id } }))
        assert.strictEqual(refused._tag, "Unauthorized")
      }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  test.effect("issue 40 (D23): messages.redact answers the redacted message; errors decode by tag (D1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const parley = yield* makeClient({ baseUrl: api.baseUrl, apiKey: org.token })
      const session = yield* parley.sessions.create({ payload: { contact_id: "+15550179", contact_name: "Rae" } })
      const message = yield* parley.messages.create({
        params: { session_id: session.id },
        payload: { role: "user", content: { type: "text", text: "my pin is 1234" } }
      })
      const redacted = yield* parley.messages.redact({ params: { session_id: session.id, message_id: message.id } })
      assert.deepStrictEqual(redacted.content, { type: "redacted" })
      assert.isString(redacted.redacted_at)
      const missing = yield* Effect.flip(
        parley.messages.redact({ params: { session_id: session.id, message_id: crypto.randomUUID() } })
      )
      assert.strictEqual(missing._tag, "MessageNotFound")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  test.effect(
    "issue 40 (D22): erasures.erase answers the pending erasure, erasures.get follows it; 404s decode by tag",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const parley = yield* makeClient({ baseUrl: api.baseUrl, apiKey: org.token })
        yield* parley.sessions.create({ payload: { contact_id: "+15550177", contact_name: "Erin" } })
        const erasure = yield* parley.erasures.erase({ params: { contact_id: "+15550177" } })
        assert.strictEqual(erasure.status, "pending")
        assert.strictEqual(erasure.contact_id, "+15550177")
        assert.deepStrictEqual(yield* parley.erasures.get({ params: { erasure_id: erasure.id } }), erasure)
        const unknown = yield* Effect.flip(parley.erasures.erase({ params: { contact_id: "+15550178" } }))
        assert.strictEqual(unknown._tag, "ContactNotFound")
        const missing = yield* Effect.flip(parley.erasures.get({ params: { erasure_id: crypto.randomUUID() } }))
        assert.strictEqual(missing._tag, "ErasureNotFound")
      }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  test.effect(
    "issue 39 item 6: organizations, API keys, agents and assistants can be listed, read, updated and deleted through the client; errors decode by tag",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const parley = yield* makeClient({ baseUrl: api.baseUrl, apiKey: org.token, adminToken: ADMIN_TOKEN })
        const org_id = org.id
        const organizations = yield* parley.admin.listOrganizations({ query: { limit: 1000 } })
        assert.isTrue(organizations.some((organization) => organization.id === org_id))
        const keys = yield* parley.admin.listApiKeys({ params: { org_id } })
        assert.deepStrictEqual(
          keys.map((key) => [key.name, key.token_last4]),
          [["test", org.token.slice(-4)]]
        )
        assert.isFalse("token" in keys[0]!)
        const assistant = yield* parley.assistantsAdmin.createAssistant({
          params: { org_id },
          payload: { name: "Bot", description: "Helps" }
        })
        assert.deepStrictEqual(yield* parley.assistants.listAssistants({ query: {} }), [assistant])
        assert.deepStrictEqual(yield* parley.assistantsAdmin.listAssistants({ params: { org_id }, query: {} }), [
          assistant
        ])
        const assistant_id = assistant.id
        assert.deepStrictEqual(yield* parley.assistants.getAssistant({ params: { assistant_id } }), assistant)
        const renamed = yield* parley.assistants.updateAssistant({
          params: { assistant_id },
          payload: { name: "Bot 2" }
        })
        assert.strictEqual(renamed.name, "Bot 2")
        const described = yield* parley.assistantsAdmin.updateAssistant({
          params: { org_id, assistant_id },
          payload: { description: null }
        })
        assert.deepStrictEqual(
          yield* parley.assistantsAdmin.getAssistant({ params: { org_id, assistant_id } }),
          described
        )
        const agent = yield* parley.admin.createAgent({
          params: { org_id },
          payload: { name: "Bot", type: "ai", assistant_id }
        })
        const agent_id = agent.id
        assert.deepStrictEqual(yield* parley.admin.getAgent({ params: { org_id, agent_id } }), agent)
        const updated = yield* parley.admin.updateAgent({ params: { org_id, agent_id }, payload: { name: "Bot 2" } })
        assert.strictEqual(updated.name, "Bot 2")
        const inUse = yield* Effect.flip(parley.assistants.deleteAssistant({ params: { assistant_id } }))
        assert.strictEqual(inUse._tag, "AssistantInUse")
        const session = yield* parley.sessions.create({
          payload: { contact_id: "+15550190", contact_name: "Ada", agent_id }
        })
        const agentInUse = yield* Effect.flip(parley.admin.deleteAgent({ params: { org_id, agent_id } }))
        assert.strictEqual(agentInUse._tag, "AgentInUse")
        yield* parley.sessions.finish({ params: { session_id: session.id }, payload: undefined })
        yield* parley.admin.deleteAgent({ params: { org_id, agent_id } })
        const gone = yield* Effect.flip(parley.admin.getAgent({ params: { org_id, agent_id } }))
        assert.strictEqual(gone._tag, "AdminAgentNotFound")
        yield* parley.assistantsAdmin.deleteAssistant({ params: { org_id, assistant_id } })
        const missing = yield* Effect.flip(parley.assistants.getAssistant({ params: { assistant_id } }))
        assert.strictEqual(missing._tag, "AssistantNotFound")
      }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  test.effect("issue 15 (D19): withIdempotencyKey sends the key, so a retried create returns the first result", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const parley = yield* makeClient({ baseUrl: api.baseUrl, apiKey: org.token })
      const session = yield* parley.sessions.create({ payload: { contact_id: "retry", contact_name: "R" } })
      const create = parley.messages
        .create({
          params: { session_id: session.id },
          payload: { role: "user", content: { type: "text", text: "once" } }
        })
        .pipe(withIdempotencyKey("client-retry-1"))
      const [first, again] = [yield* create, yield* create]
      assert.deepStrictEqual(again, first)
      const plain = yield* parley.messages.create({
        params: { session_id: session.id },
        payload: { role: "user", content: { type: "text", text: "once" } }
      })
      assert.notStrictEqual(plain.id, first.id)
      const stored = yield* parley.messages.search({
        params: { session_id: session.id },
        payload: { session_id: session.id }
      })
      assert.deepStrictEqual(
        stored.map((message) => message.id),
        [first.id, plain.id]
      )
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )
})

withWorkers({
  allowPrivateNetworkTargets: true,
  webhookRetrySchedule: [Duration.millis(100)],
  // W10: a failing app is warned of at 80 ms of failures and disabled at 400 ms.
  appDisableAfter: Duration.millis(400)
})("parley/webhooks", (test) => {
  test.effect(
    "W1, W3, W4, W10: every event type as delivered verifies and decodes into its typed event; a wrong secret, a changed body or a body that is no event are refused",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const hook = yield* receiver()
        const app = (yield* api.request("POST", `/admin/v1/organizations/${org.id}/apps`, {
          token: ADMIN_TOKEN,
          body: { name: "receiver", webhook_url: hook.url, events: eventTypes }
        })).body
        // W10: an app whose endpoint fails: the two attempts (100 ms apart) of evaluation.completed make
        // app.failing go out.
        const down = yield* receiver(() => ({ status: 503 }))
        const failing = (yield* api.request("POST", `/admin/v1/organizations/${org.id}/apps`, {
          token: ADMIN_TOKEN,
          body: { name: "down", webhook_url: down.url, events: ["evaluation.completed"] }
        })).body
        const typesReceived = () => new Set(hook.received.map((request) => JSON.parse(request.body).type))
        const received = (types: ReadonlyArray<string>) => () => types.every((type) => typesReceived().has(type))
        const session = yield* org.session()
        const message = (yield* org.call("POST", `/sessions/${session.id}/messages`, {
          role: "user",
          content: { type: "text", text: "Hello" }
        })).body
        yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.id}`, { delivery_status: "sent" })
        yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: yield* org.agent("human") })
        yield* org.call("POST", `/sessions/${session.id}/finish`, {})
        yield* eventually(
          received([
            "conversation.created",
            "session.created",
            "message.created",
            "message.updated",
            "session.transferred",
            "session.finished",
            "session.closed"
          ]),
          10_000,
          "every event of the session"
        )
        // D22: once the contact's erasure is done, contact.erased goes out too.
        yield* org.call("DELETE", `/contacts/${encodeURIComponent(session.contact_id)}`)
        yield* eventually(received(["contact.erased"]), 10_000, "contact.erased")
        // A16: an evaluation (of no session: no model is asked) completes with evaluation.completed.
        const assistant = (yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
          token: ADMIN_TOKEN,
          body: { name: "Support bot", snapshot: snapshotOf([llm("start")]) }
        })).body
        const base = `${A}/assistants/${assistant.id}`
        yield* api.request("POST", `${base}/branches/main/publish`, { token: org.token, body: { message: "v1" } })
        const started = yield* api.request("POST", `${base}/evaluations`, {
          token: org.token,
          body: { baseline: { branch_name: "main" }, candidate: { branch_name: "main", draft: true }, sessions: {} }
        })
        assert.strictEqual(started.status, 202, started.text)
        yield* eventually(received(["evaluation.completed", "app.failing"]), 10_000, "evaluation.completed")
        // W10: one more failed attempt, past 400 ms of failures, disables the failing app: app.disabled.
        const failedDeliveries = () =>
          api
            .request("GET", `/admin/v1/organizations/${org.id}/apps/${failing.id}/deliveries?status=failed`, {
              token: ADMIN_TOKEN
            })
            .pipe(Effect.map((response) => response.body as Array<{ readonly id: string }>))
        for (let waited = 0; (yield* failedDeliveries()).length === 0; waited++) {
          if (waited > 200) assert.fail("the failing app's delivery never failed")
          yield* Effect.sleep("50 millis")
        }
        yield* Effect.sleep("450 millis")
        const [failed] = yield* failedDeliveries()
        yield* api.request(
          "POST",
          `/admin/v1/organizations/${org.id}/apps/${failing.id}/deliveries/${failed!.id}/retry`,
          { token: ADMIN_TOKEN }
        )
        yield* eventually(received(eventTypes), 10_000, "every event type")

        const events = hook.received.map((request) => verifyWebhook(app.signing_secret, request.headers, request.body))
        assert.sameMembers([...new Set(events.map((event) => event.type))], [...eventTypes])
        // W7: every event names the session's conversation, the key of ordered delivery.
        assert.deepStrictEqual(
          [...new Set(events.map(conversationOf).filter((conversation) => conversation !== null))],
          [session.conversation_id]
        )
        for (const event of events) {
          assert.strictEqual(event.organization_id, org.id)
          switch (event.type) {
            case "message.created":
            case "message.updated":
              assert.strictEqual(event.data.object.id, message.id)
              break
            case "session.finished":
            case "session.closed":
              assert.strictEqual(event.data.object.action, null)
              assert.strictEqual(event.data.object.status, "closed")
              break
            case "conversation.created":
              assert.strictEqual(event.data.object.id, session.conversation_id)
              break
            case "contact.erased":
              assert.deepStrictEqual(Object.keys(event.data.object), ["contact_id", "erasure_id"])
              assert.strictEqual(event.data.object.contact_id, session.contact_id)
              break
            case "evaluation.completed":
              assert.deepInclude(event.data.object, { id: started.body.id, status: "completed", turns_total: 0 })
              break
            case "app.failing":
              assert.deepInclude(event.data.object, { id: failing.id, enabled: true, disabled_reason: null })
              assert.notProperty(event.data.object, "signing_secret")
              break
            case "app.disabled":
              assert.deepInclude(event.data.object, { id: failing.id, enabled: false, disabled_reason: "failing" })
              assert.notProperty(event.data.object, "signing_secret")
              break
            default:
              assert.strictEqual(event.data.object.id, session.id)
          }
        }

        const request = hook.received[0]!
        const otherSecret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`
        assert.throws(() => verifyWebhook(otherSecret, request.headers, request.body), WebhookVerificationError)
        assert.throws(
          () => verifyWebhook(app.signing_secret, request.headers, `${request.body} `),
          WebhookVerificationError
        )
        assert.throws(() => verifyWebhook(app.signing_secret, {}, request.body), WebhookVerificationError)
        assert.throws(() => verifyWebhook("not-a-secret", request.headers, request.body), Error)
        const fetchHeaders = new Headers(request.headers as Record<string, string>)
        assert.strictEqual(verifyWebhook(app.signing_secret, fetchHeaders, Buffer.from(request.body)).id, events[0]!.id)
        const notAnEvent = JSON.stringify({ id: "x", type: "order.paid" })
        const now = new Date()
        const signed = {
          "webhook-id": "msg_1",
          "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
          "webhook-signature": new Webhook(app.signing_secret).sign("msg_1", now, notAnEvent)
        }
        assert.throws(() => verifyWebhook(app.signing_secret, signed, notAnEvent), /Expected|Missing|type/)
      })
  )
})

/** The files and packages `entry` imports, transitively (relative imports followed, packages by name). */
const importGraph = (entry: string) => {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    const source = fs.readFileSync(file, "utf8")
    for (const [, specifier] of source.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"/gms)) {
      if (specifier!.startsWith(".")) visit(path.resolve(path.dirname(file), specifier!))
      else
        packages.add(
          specifier!
            .split("/")
            .slice(0, specifier!.startsWith("@") ? 2 : 1)
            .join("/")
        )
    }
  }
  visit(path.join(root, entry))
  return { files: [...files].map((file) => path.relative(root, file)), packages: [...packages].sort() }
}

describe("the clients' imports", () => {
  it.effect("issue 14: parley/client and parley/webhooks import only effect, standardwebhooks and contract files", () =>
    Effect.sync(() => {
      for (const entry of ["src/client.ts", "src/Webhooks/Receiver.ts"]) {
        const graph = importGraph(entry)
        assert.includeMembers(["effect", "standardwebhooks"], graph.packages, entry)
        for (const file of graph.files) {
          assert.match(
            file,
            /^src\/(client|Api|OpenApi)\.ts$|^src\/Webhooks\/Receiver\.ts$|^src\/Domain\/[A-Za-z]+\.ts$|^src\/[A-Za-z]+\/(Api|Errors)\.ts$/,
            `${entry} imports ${file}`
          )
        }
      }
    })
  )

  it.effect("issue 14: both resolve by the package's name (`exports`) in a plain Node process", () =>
    Effect.gen(function* () {
      const script = path.join(root, "test/artifacts/import-by-name.mjs")
      fs.mkdirSync(path.dirname(script), { recursive: true })
      fs.writeFileSync(
        script,
        `import { makeClient } from "parley/client"\nimport { verifyWebhook, eventTypes } from "parley/webhooks"\nconsole.log(typeof makeClient, typeof verifyWebhook, eventTypes.length)\n`
      )
      const run = yield* Effect.promise(() => runNode(script, [], {}))
      assert.strictEqual(run.stdout.trim(), `function function ${eventTypes.length}`, run.stderr)
    })
  )
})
