/**
 * Rollouts and session pinning (DECISIONS.md A12, A13; issue 17; issue 37 item
 * 1): the split, the rollout's lifecycle and what each session's runs read
 * (`Assistants.sessionRuntime`), on the production services of the assistants
 * domain over the file's database (test/support/RulesDatabase.ts), on the
 * TestClock; no HTTP. Each test's assistants belong to an organization of their
 * own, and its sessions have ids of their own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Array as Arr, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { inRollout, Rollouts } from "../../src/Assistants/Rollouts.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { newAssistant } from "../support/AssistantFixture.ts"
import { llm } from "../support/AssistantItems.ts"
import { onDatabase } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/**
 * `n` fixed session ids (UUID version 7 form), the same in every run, so the
 * split's counts are too; `series` (0-4095) sets apart the ids of each test,
 * which share the file's `sessions` table.
 */
const sessionIds = (n: number, series = 0) =>
  Array.from(
    { length: n },
    (_, i) => `019ab000-0000-7${series.toString(16).padStart(3, "0")}-8000-${i.toString(16).padStart(12, "0")}`
  )

/**
 * Open sessions of the organization with ids `ids` (one conversation), written
 * straight into the tables (no events): a session's assignment references its
 * row (A12). Returns `ids` (`SqlClient` required).
 */
const openSessions = (organizationId: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const conversationId = newId()
    yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
      VALUES (${conversationId}, ${organizationId}, 'rollouts', now())`
    const rows: ReadonlyArray<Record<string, unknown>> = ids.map((id) => ({
      id,
      organization_id: organizationId,
      conversation_id: conversationId,
      contact_id: "rollouts",
      status: "open",
      created_at: new Date()
    }))
    if (Arr.isReadonlyArrayNonEmpty(rows)) yield* sql`INSERT INTO sessions ${sql.insert(rows)}`
    return ids
  }).pipe(Effect.orDie)

/** An assistant with main and `feature` published (`feature` one commit ahead), and its rollouts service. */
const withFeature = Effect.gen(function* () {
  const fx = yield* newAssistant()
  yield* fx.changeset("main", { nodes: { upsert: [llm("start")] }, config: { initial_node_id: "start" } })
  const v1 = yield* fx.publish("main", { message: "v1" })
  yield* fx.branch("feature")
  yield* fx.rename("feature", "start", "Friendlier start")
  const feature = yield* fx.publish("feature", { message: "friendlier" })
  const rollouts = yield* Rollouts
  const read = (sessionId: string) => fx.assistants.sessionRuntime(fx.organizationId, fx.id, sessionId)
  return { ...fx, v1, feature, rollouts, read }
})

describe("A12 the split", () => {
  it("stays within 3 points of percent over 2,000 sessions, and only adds sessions as percent rises", () => {
    const ids = sessionIds(2_000)
    let previous = new Set<string>()
    for (const percent of [0, 10, 25, 50, 90, 100]) {
      const taken = new Set(ids.filter((id) => inRollout(id, percent)))
      assert.isAtMost(Math.abs((taken.size / ids.length) * 100 - percent), 3, `percent ${percent}: ${taken.size}`)
      for (const id of previous) assert.isTrue(taken.has(id), `${id} left the rollout when percent rose`)
      previous = taken
    }
  })

  it("gives a session the same result every time", () => {
    for (const id of sessionIds(200)) assert.strictEqual(inRollout(id, 37), inRollout(id, 37))
  })
})

onDatabase()("rollouts on PostgreSQL", (it) => {
  describe("A12 rollouts", () => {
    it.effect("PUT returns the rollout; GET reads it; the same branch keeps its start; DELETE ends it", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        assert.strictEqual((yield* Effect.flip(fx.rollouts.get(fx.organizationId, fx.id)))._tag, "NoRollout")
        const started = yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 10 })
        assert.deepStrictEqual(
          { ...started, created_at: "", updated_at: "" },
          {
            assistant_id: fx.id,
            branch_name: "feature",
            percent: 10,
            head_commit_id: fx.feature.id,
            created_at: "",
            updated_at: ""
          }
        )
        assert.deepStrictEqual(yield* fx.rollouts.get(fx.organizationId, fx.id), started)
        const raised = yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 30 })
        assert.strictEqual(raised.percent, 30)
        assert.strictEqual(raised.created_at, started.created_at)
        yield* fx.rollouts.end(fx.organizationId, fx.id)
        assert.strictEqual((yield* Effect.flip(fx.rollouts.get(fx.organizationId, fx.id)))._tag, "NoRollout")
        assert.strictEqual((yield* Effect.flip(fx.rollouts.end(fx.organizationId, fx.id)))._tag, "NoRollout")
      })
    )

    it.effect("an unknown branch is BranchNotFound, a branch never published BranchNotPublished", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        const unknown = yield* Effect.flip(
          fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "nope", percent: 5 })
        )
        assert.strictEqual(unknown._tag, "BranchNotFound")
        yield* fx.branches.create(fx.organizationId, fx.id, { name: "draft-only" })
        // A branch made before main's first publish has no HEAD.
        const fresh = yield* newAssistant({}, fx.organizationId)
        yield* fresh.branch("early")
        const unpublished = yield* Effect.flip(
          fx.rollouts.put(fresh.organizationId, fresh.id, { branch_name: "early", percent: 5 })
        )
        assert.strictEqual(unpublished._tag, "BranchNotPublished")
        assert.strictEqual(unpublished.detail, "Branch has no published version")
      })
    )

    it.effect("a legacy assistant is AssistantNotVersioned (A1); a foreign one AssistantNotFound", () =>
      Effect.gen(function* () {
        const legacy = yield* newAssistant({ versioned: false })
        const rollouts = yield* Rollouts
        const put = rollouts.put(legacy.organizationId, legacy.id, { branch_name: "main", percent: 5 })
        assert.strictEqual((yield* Effect.flip(put))._tag, "AssistantNotVersioned")
        assert.strictEqual(
          (yield* Effect.flip(rollouts.settings(legacy.organizationId, legacy.id)))._tag,
          "AssistantNotVersioned"
        )
        const foreign = yield* Effect.flip(rollouts.get(sessionIds(1)[0]!, legacy.id))
        assert.strictEqual(foreign._tag, "AssistantNotFound")
      })
    )

    it.effect(
      "sessions read the branch the split gave them, the same on every run; DELETE sends them back to main",
      () =>
        Effect.gen(function* () {
          const fx = yield* withFeature
          yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 50 })
          const all = yield* openSessions(fx.organizationId, sessionIds(201, 1))
          const ids = all.slice(0, 200)
          for (const id of ids) {
            const first = yield* fx.read(id)
            const expected = inRollout(id, 50) ? ["feature", fx.feature.id] : ["main", fx.v1.id]
            assert.deepStrictEqual([first.branch_name, first.commit_id], expected, id)
            const again = yield* fx.read(id)
            assert.deepStrictEqual([again.branch_name, again.commit_id], expected, id)
          }
          // Raising the share takes only new sessions: a session that began on main stays there.
          yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 100 })
          const onMain = ids.find((id) => !inRollout(id, 50))!
          assert.strictEqual((yield* fx.read(onMain)).branch_name, "main")
          yield* fx.rollouts.end(fx.organizationId, fx.id)
          for (const id of ids) assert.deepStrictEqual((yield* fx.read(id)).branch_name, "main", id)
          // A rollout started later does not take them back: their branch was settled at their first run.
          yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 100 })
          const taken = ids.find((id) => inRollout(id, 50))!
          assert.strictEqual((yield* fx.read(taken)).branch_name, "main")
          assert.strictEqual((yield* fx.read(all[200]!)).branch_name, "feature")
        })
    )

    it.effect("unpinned sessions read their branch's HEAD at each run; another branch's PUT sends them to main", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 100 })
        const [id] = yield* openSessions(fx.organizationId, sessionIds(1, 2))
        assert.strictEqual((yield* fx.read(id!)).commit_id, fx.feature.id)
        yield* fx.rename("feature", "start", "Even friendlier")
        const feature2 = yield* fx.publish("feature")
        assert.strictEqual((yield* fx.read(id!)).commit_id, feature2.id)
        yield* fx.branch("other")
        yield* fx.rename("other", "start", "Other")
        yield* fx.publish("other")
        yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "other", percent: 100 })
        assert.deepStrictEqual([(yield* fx.read(id!)).branch_name, (yield* fx.read(id!)).commit_id], ["main", fx.v1.id])
      })
    )

    it.effect("deleting the rollout's branch ends the rollout", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 100 })
        const [id] = yield* openSessions(fx.organizationId, sessionIds(1, 3))
        assert.strictEqual((yield* fx.read(id!)).branch_name, "feature")
        yield* fx.branches.delete(fx.organizationId, fx.id, "feature")
        assert.strictEqual((yield* Effect.flip(fx.rollouts.get(fx.organizationId, fx.id)))._tag, "NoRollout")
        assert.strictEqual((yield* fx.read(id!)).branch_name, "main")
      })
    )
  })

  describe("A13 session pinning", () => {
    it.effect("defaults to none; PUT sets it", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        assert.deepStrictEqual(yield* fx.rollouts.settings(fx.organizationId, fx.id), { session_pinning: "none" })
        const set = yield* fx.rollouts.putSettings(fx.organizationId, fx.id, { session_pinning: "session" })
        assert.deepStrictEqual(set, { session_pinning: "session" })
        assert.deepStrictEqual(yield* fx.rollouts.settings(fx.organizationId, fx.id), set)
      })
    )

    it.effect("pinned sessions keep their commit across two publishes while new sessions take the new HEAD", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rollouts.putSettings(fx.organizationId, fx.id, { session_pinning: "session" })
        const [old, newer, newest] = yield* openSessions(fx.organizationId, sessionIds(3, 4))
        assert.strictEqual((yield* fx.read(old!)).commit_id, fx.v1.id)
        yield* fx.rename("main", "start", "v2")
        const v2 = yield* fx.publish("main")
        assert.strictEqual((yield* fx.read(newer!)).commit_id, v2.id)
        yield* fx.rename("main", "start", "v3")
        const v3 = yield* fx.publish("main")
        assert.strictEqual((yield* fx.read(old!)).commit_id, fx.v1.id)
        assert.strictEqual((yield* fx.read(newer!)).commit_id, v2.id)
        assert.strictEqual((yield* fx.read(newest!)).commit_id, v3.id)
      })
    )

    it.effect("ending a rollout moves unpinned sessions back to main while pinned ones keep their commit", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rollouts.put(fx.organizationId, fx.id, { branch_name: "feature", percent: 100 })
        const [unpinned, pinned] = yield* openSessions(fx.organizationId, sessionIds(2, 5))
        assert.strictEqual((yield* fx.read(unpinned!)).commit_id, fx.feature.id)
        yield* fx.rollouts.putSettings(fx.organizationId, fx.id, { session_pinning: "session" })
        assert.strictEqual((yield* fx.read(pinned!)).commit_id, fx.feature.id)
        yield* fx.rollouts.end(fx.organizationId, fx.id)
        const kept = yield* fx.read(pinned!)
        assert.deepStrictEqual([kept.branch_name, kept.commit_id], ["feature", fx.feature.id])
        // Pinning is per assistant: the first session is pinned now too, to the commit of its first run.
        assert.strictEqual((yield* fx.read(unpinned!)).commit_id, fx.feature.id)
        yield* fx.rollouts.putSettings(fx.organizationId, fx.id, { session_pinning: "none" })
        const back = yield* fx.read(unpinned!)
        assert.deepStrictEqual([back.branch_name, back.commit_id], ["main", fx.v1.id])
      })
    )

    it.effect("a legacy assistant's sessions read its legacy snapshot, no commit, no branch", () =>
      Effect.gen(function* () {
        const legacy = yield* newAssistant({ versioned: false })
        const read = yield* legacy.assistants.sessionRuntime(legacy.organizationId, legacy.id, sessionIds(1)[0]!)
        assert.deepStrictEqual([read.commit_id, read.branch_name], [null, null])
      })
    )
  })
})
