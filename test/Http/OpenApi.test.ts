/**
 * The OpenAPI document as integrators' tools read it (issue 14 "A document a
 * generator and a reader can use", "Webhooks in the document"): every
 * operation and tag described, bearer schemes a reference page offers a token
 * field for, ids `format: uuid`, the shared error responses, objects that do
 * not forbid members, and the `webhooks` of W1 with the W3 envelope and the W4
 * headers. `parley openapi` prints the document the server serves.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { eventTypes } from "../../src/Domain/EventType.ts"
import { NUMERIC_STRING } from "../../src/OpenApi.ts"
import { runNode } from "../support/Processes.ts"
import { C, TestApi, withApp } from "../support/TestApp.ts"

const METHODS = ["get", "put", "post", "delete", "patch"] as const

/** Every operation of the document: `[METHOD path, operation]`. */
const operationsOf = (doc: any): Array<[string, any]> =>
  Object.entries(doc.paths as Record<string, any>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method): [string, any] => [
      `${method.toUpperCase()} ${path}`,
      item[method]
    ])
  )

/** Every value in `value` (depth first), with the path that leads to it. */
const walk = (value: unknown, visit: (node: any, path: string) => void, path = "#"): void => {
  if (typeof value !== "object" || value === null) return
  visit(value, path)
  for (const [key, child] of Object.entries(value)) walk(child, visit, `${path}/${key}`)
}

/** The schema `$ref` points at. */
const resolve = (doc: any, schema: any): any =>
  typeof schema?.$ref === "string"
    ? schema.$ref
        .slice(2)
        .split("/")
        .reduce((node: any, key: string) => node[key], doc)
    : schema

withApp()("the OpenAPI document", (it) => {
  it.effect(
    "numbers in the query are documented as the integers they are, with their bounds and defaults (O6, A8, D14)",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const numbers: Record<string, unknown> = {}
        for (const [name, operation] of operationsOf(doc)) {
          for (const parameter of operation.parameters ?? []) {
            if (parameter.in !== "query") continue
            // No query parameter is left as the encoded side of a number: any numeric-looking string, unbounded.
            assert.notStrictEqual(parameter.schema.pattern, NUMERIC_STRING, `${name} ${parameter.name}`)
            if (parameter.schema.type === "integer") {
              numbers[`${name} ${parameter.name}`] = [
                parameter.schema.minimum,
                parameter.schema.maximum,
                parameter.description
              ]
            }
          }
        }
        assert.deepStrictEqual(numbers, {
          "GET /assistants/api/v2/assistants/{assistant_id}/versions limit": [
            1,
            1000,
            "Most versions on the page, 1-1000 (default 20)."
          ],
          "GET /assistants/api/v2/assistants/{assistant_id}/versions offset": [
            0,
            Number.MAX_SAFE_INTEGER,
            "Versions to skip (default 0)."
          ],
          [`GET ${C}/data/sessions limit`]: [1, 3000, "Most records on the page, 1-3000 (default 100)."],
          [`GET ${C}/data/messages limit`]: [1, 3000, "Most records on the page, 1-3000 (default 100)."],
          "GET /admin/v1/organizations/{org_id}/apps/{app_id}/deliveries limit": [
            1,
            1000,
            "Most deliveries on the page, 1-1000 (default 100)."
          ],
          // Issue 39 item 6: the lists paged by id.
          "GET /admin/v1/organizations limit": [1, 1000, "Most items on the page, 1-1000 (default 100)."],
          "GET /admin/v1/organizations/{org_id}/assistants limit": [
            1,
            1000,
            "Most items on the page, 1-1000 (default 100)."
          ],
          "GET /assistants/api/v2/assistants limit": [1, 1000, "Most items on the page, 1-1000 (default 100)."],
          // A16: evaluations by id, their turns by keyset.
          "GET /assistants/api/v2/assistants/{assistant_id}/evaluations limit": [
            1,
            1000,
            "Most items on the page, 1-1000 (default 100)."
          ],
          "GET /assistants/api/v2/assistants/{assistant_id}/evaluations/{evaluation_id}/turns limit": [
            1,
            1000,
            "Most turns on the page, 1-1000 (default 100)."
          ]
        })
      })
  )

  it.effect(
    "issue 15 (D20): every operation of the conversations and assistants APIs documents 429 with Retry-After and RateLimit-*",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const limited = doc.components.responses.RateLimited
        assert.deepStrictEqual(Object.keys(limited.headers).sort(), [
          "RateLimit-Limit",
          "RateLimit-Remaining",
          "RateLimit-Reset",
          "Retry-After",
          "X-Request-Id"
        ])
        assert.deepStrictEqual(limited.content["application/json"].example, { detail: "Rate limit exceeded" })
        for (const [name, operation] of operationsOf(doc)) {
          const api = / \/(conversations|assistants)\//.test(name)
          assert.strictEqual(operation.responses["429"]?.$ref === "#/components/responses/RateLimited", api, name)
        }
      })
  )

  it.effect(
    "issue 15 (D19): every POST and PATCH of the conversations and assistants APIs takes Idempotency-Key, documents its 409 (with Retry-After) and 422, and Idempotent-Replayed on success; admin operations do not",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const header = doc.components.parameters.IdempotencyKey
        assert.deepStrictEqual([header.name, header.in, header.required], ["Idempotency-Key", "header", false])
        assert.deepStrictEqual([header.schema.minLength, header.schema.maxLength], [1, 255])
        let covered = 0
        for (const [name, operation] of operationsOf(doc)) {
          const writes = name.startsWith("POST ") || name.startsWith("PATCH ")
          const api = / \/(conversations|assistants)\//.test(name)
          const takesKey = (operation.parameters ?? []).some(
            (parameter: any) => parameter.$ref === "#/components/parameters/IdempotencyKey"
          )
          assert.strictEqual(takesKey, writes && api, name)
          if (!takesKey) continue
          covered++
          const texts = (status: string) => JSON.stringify(resolve(doc, operation.responses[status]))
          assert.match(texts("409"), /Idempotency-Key/, name)
          // Issue 38 item 6: the 409 of a key in progress carries Retry-After.
          assert.isDefined(resolve(doc, operation.responses["409"]).headers?.["Retry-After"], name)
          assert.match(texts("422"), /Idempotency-Key|ErrorDetail/, name)
          for (const [status, response] of Object.entries(operation.responses as Record<string, any>)) {
            if (status.startsWith("2")) assert.isDefined(resolve(doc, response).headers?.["Idempotent-Replayed"], name)
          }
        }
        assert.isAtLeast(covered, 20)
      })
  )

  it.effect(
    "issue 39 item 3: every response documents X-Request-Id (O8); every response of the conversations and assistants APIs RateLimit-* (D20)",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        let responses = 0
        for (const [name, operation] of operationsOf(doc)) {
          const organization = / \/(conversations|assistants)\//.test(name)
          for (const [status, response] of Object.entries(operation.responses as Record<string, any>)) {
            const headers = Object.fromEntries(
              Object.entries(resolve(doc, response).headers ?? {}).map(([header, value]) => [
                header,
                resolve(doc, value)
              ])
            )
            assert.match(headers["X-Request-Id"]?.description ?? "", /O8/, `${name} ${status}`)
            // A response shared with the admin API (a `$ref` to 413, 415, 500, 503) shows them there too.
            if (organization) {
              for (const header of ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]) {
                assert.isDefined(headers[header], `${name} ${status} ${header}`)
              }
            }
            responses++
          }
        }
        assert.isAbove(responses, 200)
      })
  )

  it.effect("issue 39 item 3: every datetime a request may carry is documented as format date-time", () =>
    Effect.gen(function* () {
      const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
      const datetimes: Array<string> = []
      for (const [name, operation] of operationsOf(doc)) {
        for (const parameter of operation.parameters ?? []) {
          const resolved = resolve(doc, parameter)
          if (/^(since|until|(created|updated)_(after|before))$/.test(resolved.name)) {
            assert.strictEqual(resolved.schema.format, "date-time", `${name} ${resolved.name}`)
            datetimes.push(`${name} ${resolved.name}`)
          }
        }
        const body = resolve(doc, operation.requestBody?.content?.["application/json"]?.schema)
        for (const member of ["scheduled_for", "delivered_at", "expires_at", "since", "until"]) {
          const schema = resolve(doc, body?.properties?.[member])
          if (schema === undefined) continue
          const types = [schema, ...(schema.anyOf ?? []).map((alternative: any) => resolve(doc, alternative))]
          assert.isTrue(
            types.some((type: any) => type.format === "date-time"),
            `${name} ${member}: ${JSON.stringify(schema)}`
          )
          datetimes.push(`${name} ${member}`)
        }
      }
      // The issue's fifteen: scheduled_for, delivered_at, expires_at, the run statistics' and the recovery's
      // since/until, the export filters.
      assert.strictEqual(datetimes.length, 15, datetimes.join("\n"))
    })
  )

  it.effect(
    "issue 14: every operation has a summary and a description, every tag a description; servers and license are set",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const operations = operationsOf(doc)
        assert.isAbove(operations.length, 70)
        for (const [name, operation] of operations) {
          assert.isString(operation.summary, name)
          assert.isAbove(operation.summary.length, 5, name)
          assert.isString(operation.description, name)
          assert.isAbove(operation.description.length, 20, name)
        }
        for (const tag of doc.tags) assert.isAbove(tag.description?.length ?? 0, 20, tag.name)
        const used = new Set(operations.flatMap(([, operation]) => operation.tags))
        for (const name of used)
          assert.isDefined(
            doc.tags.find((tag: any) => tag.name === name),
            name
          )
        assert.deepStrictEqual(doc.servers, [{ url: "/", description: "This server" }])
        assert.strictEqual(doc.info.license.identifier, "MIT")
      })
  )

  it.effect(
    "issue 14: the API key and the admin token are bearer schemes (lowercase: reference pages offer a token field), per API",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const schemes = doc.components.securitySchemes
        assert.deepStrictEqual(Object.keys(schemes).sort(), ["adminToken", "apiKey"])
        for (const scheme of Object.values(schemes) as Array<any>) {
          assert.deepStrictEqual([scheme.type, scheme.scheme], ["http", "bearer"])
          assert.isString(scheme.description)
        }
        for (const [name, operation] of operationsOf(doc)) {
          const expected = name.includes(" /admin/v1/") ? "adminToken" : "apiKey"
          assert.deepStrictEqual(operation.security, [{ [expected]: [] }], name)
        }
      })
  )

  it.effect(
    "issue 14: ids Parley makes are format uuid; free-form objects take any member; no object forbids members",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const schemas = doc.components.schemas
        for (const [schema, field] of [
          ["Session", "id"],
          ["Session", "organization_id"],
          ["Session", "conversation_id"],
          ["Message", "id"],
          ["Message", "session_id"],
          ["Conversation", "id"],
          ["App", "id"],
          ["Delivery", "event_id"],
          ["SessionSchedule", "id"]
        ] as const) {
          assert.strictEqual(schemas[schema].properties[field].format, "uuid", `${schema}.${field}`)
          assert.isString(schemas[schema].properties[field].description, `${schema}.${field}`)
        }
        assert.strictEqual(schemas.Session.properties.metadata.additionalProperties, true)
        walk(doc, (node, path) => {
          assert.notStrictEqual(node.additionalProperties, false, path)
          if (node.type === "object" && node.properties === undefined) {
            assert.isDefined(node.additionalProperties ?? node.patternProperties, `${path}: a bare object`)
          }
        })
        // The body of POST /sessions is open: the server ignores members it does not know.
        const create = resolve(doc, doc.paths[`${C}/sessions`].post.requestBody.content["application/json"].schema)
        assert.isUndefined(create.additionalProperties)
        assert.isArray(create.examples)
      })
  )

  it.effect(
    "issue 14, DECISIONS 'Errors', O9: every operation documents 500 and 503, those with a body 413 and 415, from shared components",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        for (const [name, operation] of operationsOf(doc)) {
          const statuses = Object.keys(operation.responses)
          for (const status of ["401", "422", "500", "503"]) assert.include(statuses, status, name)
          if (operation.requestBody !== undefined) {
            assert.deepStrictEqual(operation.responses["413"], { $ref: "#/components/responses/PayloadTooLarge" })
            assert.deepStrictEqual(operation.responses["415"], {
              $ref: "#/components/responses/UnsupportedMediaType"
            })
          }
        }
        const unavailable = doc.components.responses.ServiceUnavailable
        assert.deepStrictEqual(unavailable.content["application/json"].example, { detail: "Service unavailable" })
        assert.isDefined(unavailable.headers["retry-after"])
        walk(doc, (node, path) => {
          if (typeof node.$ref === "string") assert.isDefined(resolve(doc, node), `${path} -> ${node.$ref}`)
        })
        const names = Object.keys(doc.components.schemas)
        assert.deepStrictEqual(
          names.filter((name) => name.endsWith("Encoded")),
          [],
          "component names are the errors' and resources' own"
        )
      })
  )

  it.effect(
    "issue 14, W1, W3, W4, W10: webhooks lists every event type with its envelope, data.object and the Standard Webhooks headers",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        assert.deepStrictEqual(Object.keys(doc.webhooks).sort(), [...eventTypes].sort())
        const objects: Record<string, string> = {
          "message.created": "Message",
          "message.updated": "Message",
          "session.created": "Session",
          "session.transferred": "Session",
          "conversation.created": "Conversation",
          // D22: the contact's id and the erasure's, nothing else.
          "contact.erased": "ContactErased",
          // A16: the evaluation with its summary.
          "evaluation.completed": "Evaluation",
          // W10: the app as the admin API shows it, without its secret.
          "app.failing": "AppWithoutSecret",
          "app.disabled": "AppWithoutSecret"
        }
        for (const type of eventTypes) {
          const operation = doc.webhooks[type].post
          assert.deepStrictEqual(
            operation.parameters.map((parameter: any) => [parameter.in, parameter.name, parameter.required]),
            [
              ["header", "webhook-id", true],
              ["header", "webhook-timestamp", true],
              ["header", "webhook-signature", true],
              ["header", "traceparent", false]
            ]
          )
          const event = resolve(doc, operation.requestBody.content["application/json"].schema)
          assert.deepStrictEqual(event.required, ["id", "timestamp", "type", "organization_id", "data"])
          assert.deepStrictEqual(resolve(doc, event.properties.type).enum ?? [event.properties.type.const], [type])
          const object = event.properties.data.properties.object
          if (objects[type] !== undefined) {
            assert.strictEqual(object.$ref, `#/components/schemas/${objects[type]}`, type)
            if (type === "contact.erased") {
              const erased = resolve(doc, object)
              assert.deepStrictEqual(Object.keys(erased.properties), ["contact_id", "erasure_id"])
              assert.deepStrictEqual(erased.required, ["contact_id", "erasure_id"])
            }
            if (type === "app.failing" || type === "app.disabled") {
              const app = resolve(doc, object)
              assert.deepStrictEqual(Object.keys(app.properties), [
                "id",
                "name",
                "webhook_url",
                "events",
                "enabled",
                "disabled_reason",
                "disabled_at",
                "ordering",
                "created_at"
              ])
            }
          } else {
            // session.finished and session.closed: the session with its action (W1).
            assert.includeMembers(object.required, ["id", "status", "action"], type)
          }
          assert.include(operation.responses, { "2XX": operation.responses["2XX"] })
        }
      })
  )

  it.effect(
    "issue 37 item 3: the bodies of transfer, finish, reply and publish are optional objects, never null; every other body is required",
    () =>
      Effect.gen(function* () {
        const doc = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
        const optional: Array<string> = []
        for (const [name, operation] of operationsOf(doc)) {
          if (operation.requestBody === undefined) continue
          if (operation.requestBody.required === false) optional.push(name)
          else assert.strictEqual(operation.requestBody.required, true, name)
          const schema = resolve(doc, operation.requestBody.content["application/json"].schema)
          assert.strictEqual(schema.type, "object", name)
        }
        assert.deepStrictEqual(optional.sort(), [
          "POST /assistants/api/v2/assistants/{assistant_id}/branches/{branch_name}/publish",
          `POST ${C}/sessions/{session_id}/finish`,
          `POST ${C}/sessions/{session_id}/reply`,
          `POST ${C}/sessions/{session_id}/transfer`
        ])
      })
  )

  it.effect("issue 14: `parley openapi` prints the document the server serves, with no database", () =>
    Effect.gen(function* () {
      const served = (yield* (yield* TestApi).request("GET", "/openapi.json")).body
      const printed = yield* Effect.promise(() =>
        runNode("src/cli.ts", ["openapi"], { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" })
      )
      assert.strictEqual(printed.code, 0, printed.stderr)
      assert.deepStrictEqual(JSON.parse(printed.stdout), served)
    })
  )
})
