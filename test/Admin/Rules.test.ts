/**
 * The rules of the admin service (DECISIONS.md O6, "Errors" 401; issue 13
 * item 8, issue 37 item 1): `Admin` with `it.effect` over the production
 * services on the file's database (test/support/RulesDatabase.ts), so the
 * rules run on the SQL of `AdminRepo`. Its moments (created_at, revocation,
 * the expiry check) are the database's `now()`, not `TestClock`: a created_at
 * is checked between two readings of that clock, and a key's expiry is moved
 * on with `elapse`, which shifts the organization's timestamps back. Each test
 * makes its own organizations. The integration suite (Admin.test.ts) checks
 * the same through HTTP.
 */
import * as crypto from "node:crypto"
import { assert, describe } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Admin, hashToken } from "../../src/Admin/Admin.ts"
import { isoTimestamp } from "../../src/Database/Json.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { elapse, onDatabase, rowsOf, setColumn, snapshotTables } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** Runs `f` with the Admin service over the file's database. */
const withAdmin = <A, E, R>(f: (admin: Admin["Service"]) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    return yield* f(yield* Admin)
  })

/** The database's clock `seconds` from now, as `isoTimestamp` writes it (ISO 8601, microseconds). */
const databaseTime = (seconds = 0) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ moment: string }>`SELECT ${sql.literal(
      isoTimestamp(`(statement_timestamp() + make_interval(secs => ${Number(seconds)}))`)
    )} AS moment`
    return rows[0]!.moment
  }).pipe(Effect.orDie)

/** Stores an API key of `organizationId` whose token hashes to `token`'s SHA-256, as another writer would. */
const storeKey = (organizationId: string, token: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO api_keys (id, organization_id, name, token_hash, created_at)
      VALUES (${newId()}, ${organizationId}, ${null}, ${hashToken(token)}, now())`
  }).pipe(Effect.orDie)

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/
const sha256Hex = (text: string) => crypto.createHash("sha256").update(text, "utf8").digest("hex")

onDatabase()("Admin on PostgreSQL", (it) => {
  describe("organizations (O6)", () => {
    it.effect(
      "O6: an organization is created with {id, name, created_at} and found; unknown ids are OrganizationNotFound",
      () =>
        withAdmin((admin) =>
          Effect.gen(function* () {
            const before = yield* databaseTime()
            const created = yield* admin.createOrganization("Acme")
            const after = yield* databaseTime()
            assert.deepStrictEqual(Object.keys(created), ["id", "name", "created_at"])
            assert.strictEqual(created.name, "Acme")
            // created_at is the database's moment of the insert, to the microsecond.
            assert.match(created.created_at, TIMESTAMP)
            assert.isTrue(before <= created.created_at && created.created_at <= after, created.created_at)
            assert.deepStrictEqual(yield* admin.getOrganization(created.id), created)
            yield* setColumn("organizations", created.id, "created_at", new Date("2025-01-02T03:04:05.678Z"))
            assert.strictEqual((yield* admin.getOrganization(created.id)).created_at, "2025-01-02T03:04:05.678000Z")
            for (const id of [newId(), "nope"]) {
              const error = yield* Effect.flip(admin.getOrganization(id))
              assert.strictEqual(error._tag, "OrganizationNotFound")
              assert.strictEqual(error.detail, "Organization not found")
            }
          })
        )
    )

    it.effect("O6: every operation on an unknown organization is OrganizationNotFound", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const unknown = newId()
          const tags = [
            (yield* Effect.flip(admin.createApiKey(unknown, {})))._tag,
            (yield* Effect.flip(admin.revokeApiKey(unknown, newId())))._tag,
            (yield* Effect.flip(admin.createAgent(unknown, { name: "a", type: "human", profile_id: "p" })))._tag,
            (yield* Effect.flip(admin.listAgents(unknown)))._tag,
            (yield* Effect.flip(admin.getSettings(unknown)))._tag,
            (yield* Effect.flip(admin.updateSettings(unknown, { reply_debounce_seconds: 1 })))._tag,
            // Issue 39 item 6.
            (yield* Effect.flip(admin.listApiKeys(unknown)))._tag,
            (yield* Effect.flip(admin.getAgent(unknown, newId())))._tag,
            (yield* Effect.flip(admin.updateAgent(unknown, newId(), { name: "b" })))._tag,
            (yield* Effect.flip(admin.deleteAgent(unknown, newId())))._tag
          ]
          assert.deepStrictEqual(tags, Array(10).fill("OrganizationNotFound"))
        })
      )
    )
  })

  describe("API keys (O6, Errors 401)", () => {
    it.effect(
      "O6: the token (prl_ + 32 random bytes) is in the creation response only; the store keeps its SHA-256",
      () =>
        withAdmin((admin) =>
          Effect.gen(function* () {
            const org = yield* admin.createOrganization("Keys")
            const key = yield* admin.createApiKey(org.id, { name: "ci" })
            assert.deepStrictEqual(Object.keys(key), ["id", "name", "token", "created_at", "expires_at"])
            assert.match(key.token, /^prl_[A-Za-z0-9_-]{43}$/)
            assert.strictEqual(key.name, "ci")
            assert.match(key.created_at, TIMESTAMP)
            assert.strictEqual(key.expires_at, null)
            const [stored] = yield* rowsOf("api_keys", "id", key.id)
            const storedHash = Buffer.from(stored!.token_hash).toString("hex")
            assert.strictEqual(storedHash, sha256Hex(key.token))
            assert.strictEqual(Buffer.from(hashToken(key.token)).toString("hex"), storedHash)
            // No table of the database holds the token's random part.
            assert.notInclude(JSON.stringify(yield* snapshotTables), key.token.slice(4))
            const other = yield* admin.createApiKey(org.id, {})
            assert.notStrictEqual(other.token, key.token)
            assert.strictEqual(other.name, null)
          })
        )
    )

    it.effect("O6: a live token authenticates its organization; a revoked one at once no more (401)", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const org = yield* admin.createOrganization("Live")
          const key = yield* admin.createApiKey(org.id, {})
          const kept = yield* admin.createApiKey(org.id, {})
          assert.strictEqual(yield* admin.authenticate(key.token), org.id)
          yield* admin.revokeApiKey(org.id, key.id)
          assert.isUndefined(yield* admin.authenticate(key.token))
          assert.strictEqual(yield* admin.authenticate(kept.token), org.id)
          // DELETE again: the key still exists (204), its revocation moment is kept.
          yield* admin.revokeApiKey(org.id, key.id)
          assert.isUndefined(yield* admin.authenticate(`${key.token}x`))
        })
      )
    )

    it.effect(
      "O6: revoking an unknown key or another organization's is ApiKeyNotFound, and that key keeps working",
      () =>
        withAdmin((admin) =>
          Effect.gen(function* () {
            const org = yield* admin.createOrganization("Mine")
            const other = yield* admin.createOrganization("Theirs")
            const theirs = yield* admin.createApiKey(other.id, {})
            for (const keyId of [newId(), "not-a-uuid", theirs.id]) {
              const error = yield* Effect.flip(admin.revokeApiKey(org.id, keyId))
              assert.strictEqual(error._tag, "ApiKeyNotFound")
              assert.strictEqual(error.detail, "API key not found")
            }
            assert.strictEqual(yield* admin.authenticate(theirs.token), other.id)
          })
        )
    )

    it.effect("O6, Errors 401: a key stops working at its expires_at", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const org = yield* admin.createOrganization("Expiring")
          // A minute after the database's clock, with microseconds: the key keeps them, and is checked against now().
          const expiresAt = yield* databaseTime(60)
          const key = yield* admin.createApiKey(org.id, { expires_at: expiresAt })
          assert.strictEqual(key.expires_at, expiresAt)
          // t = 55 s and what the test took meanwhile on the database's clock (a few seconds spare on a loaded machine).
          yield* elapse(55, org.id)
          assert.strictEqual(yield* admin.authenticate(key.token), org.id)
          // t = 60 s and that little more: expires_at has come.
          yield* elapse(5, org.id)
          assert.isUndefined(yield* admin.authenticate(key.token))
        })
      )
    )

    it.effect("Errors 401: an empty token or one over 512 characters is refused even when its hash is stored", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const org = yield* admin.createOrganization("Long")
          const store512 = `prl_${"a".repeat(508)}`
          const results: Array<string | undefined> = []
          for (const token of [store512, `${store512}a`, ""]) {
            yield* storeKey(org.id, token)
            results.push(yield* admin.authenticate(token))
          }
          assert.deepStrictEqual(results, [org.id, undefined, undefined])
        })
      )
    )
  })

  describe("agents (O6, D6)", () => {
    it.effect("O6: an ai agent needs assistant_id, a human agent profile_id: else 422 at that body member", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const org = yield* admin.createOrganization("Agents")
          const ai = yield* Effect.flip(admin.createAgent(org.id, { name: "bot", type: "ai", profile_id: "p" }))
          assert.strictEqual(ai._tag, "ValidationFailed")
          assert.deepStrictEqual(ai._tag === "ValidationFailed" ? ai.detail : undefined, [
            { loc: ["body", "assistant_id"], msg: "Field required", type: "missing" }
          ])
          const human = yield* Effect.flip(admin.createAgent(org.id, { name: "op", type: "human", assistant_id: "a" }))
          assert.deepStrictEqual(human._tag === "ValidationFailed" ? human.detail : undefined, [
            { loc: ["body", "profile_id"], msg: "Field required", type: "missing" }
          ])
          assert.deepStrictEqual(yield* admin.listAgents(org.id), [])
        })
      )
    )

    it.effect("O6: agents have the spec's shape per type and are listed oldest first, per organization", () =>
      withAdmin((admin) =>
        Effect.gen(function* () {
          const org = yield* admin.createOrganization("Agents")
          const other = yield* admin.createOrganization("Other")
          // The reference of the other type is not kept. Each insert is a transaction of its own: a later now().
          const bot = yield* admin.createAgent(org.id, {
            name: "bot",
            type: "ai",
            assistant_id: "asst",
            profile_id: "p"
          })
          const op = yield* admin.createAgent(org.id, { name: "op", type: "human", profile_id: "prof" })
          yield* admin.createAgent(other.id, { name: "theirs", type: "human", profile_id: "x" })
          assert.deepStrictEqual(Object.keys(bot), [
            "id",
            "name",
            "type",
            "assistant_id",
            "organization_id",
            "created_at"
          ])
          assert.deepStrictEqual(Object.keys(op), ["id", "name", "type", "profile_id", "organization_id", "created_at"])
          assert.strictEqual(bot.type === "ai" ? bot.assistant_id : undefined, "asst")
          assert.strictEqual(bot.organization_id, org.id)
          assert.deepStrictEqual(yield* admin.listAgents(org.id), [bot, op])
        })
      )
    )
  })

  describe("settings (O6, D9, D11, D16)", () => {
    it.effect(
      "O6: defaults are debounce 3 s, no idle timeout, no default agent; a PATCH changes only its members",
      () =>
        withAdmin((admin) =>
          Effect.gen(function* () {
            const org = yield* admin.createOrganization("Settings")
            assert.deepStrictEqual(yield* admin.getSettings(org.id), {
              reply_debounce_seconds: 3,
              session_idle_timeout_seconds: null,
              default_agent_id: null,
              rate_limit_per_second: null,
              rate_limit_burst: null,
              message_retention_days: null,
              event_retention_days: 30
            })
            const agent = yield* admin.createAgent(org.id, { name: "bot", type: "ai", assistant_id: "a" })
            const all = {
              reply_debounce_seconds: 0,
              session_idle_timeout_seconds: 600,
              default_agent_id: agent.id,
              rate_limit_per_second: 50,
              rate_limit_burst: null,
              message_retention_days: 90,
              event_retention_days: null
            }
            assert.deepStrictEqual(yield* admin.updateSettings(org.id, all), all)
            assert.deepStrictEqual(yield* admin.updateSettings(org.id, { reply_debounce_seconds: 7 }), {
              ...all,
              reply_debounce_seconds: 7
            })
            // null clears, absent keeps.
            const cleared = yield* admin.updateSettings(org.id, {
              session_idle_timeout_seconds: null,
              default_agent_id: null
            })
            assert.deepStrictEqual(cleared, {
              reply_debounce_seconds: 7,
              session_idle_timeout_seconds: null,
              default_agent_id: null,
              rate_limit_per_second: 50,
              rate_limit_burst: null,
              message_retention_days: 90,
              event_retention_days: null
            })
            assert.deepStrictEqual(yield* admin.getSettings(org.id), cleared)
          })
        )
    )

    it.effect(
      "D6, O6: a default agent that is unknown or another organization's is AgentNotFound and changes nothing",
      () =>
        withAdmin((admin) =>
          Effect.gen(function* () {
            const org = yield* admin.createOrganization("Mine")
            const other = yield* admin.createOrganization("Theirs")
            const theirs = yield* admin.createAgent(other.id, { name: "bot", type: "ai", assistant_id: "a" })
            for (const agentId of [theirs.id, newId(), "not-a-uuid"]) {
              const error = yield* Effect.flip(
                admin.updateSettings(org.id, { reply_debounce_seconds: 9, default_agent_id: agentId })
              )
              assert.strictEqual(error._tag, "AgentNotFound")
              assert.strictEqual(error.detail, "Agent not found")
            }
            assert.strictEqual((yield* admin.getSettings(org.id)).reply_debounce_seconds, 3)
          })
        )
    )
  })
})
