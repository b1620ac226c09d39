/**
 * The assistants domain over its PostgreSQL repository (`Assistants.layer`),
 * with no HTTP and on the TestClock, for the rules whose SQL matters: two
 * branches making the same commit at once (A5), concurrently, so the second
 * insert waits for the first and finds its commit.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Assistants } from "../../src/Assistants/Assistants.ts"
import { Ids, makeIdGenerator } from "../../src/Shared/Ids.ts"
import { newAssistant } from "../support/AssistantFixture.ts"
import { llm } from "../support/AssistantItems.ts"
import { FileDatabase } from "../support/Database.ts"
import { TestDatabase } from "../support/TestApp.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

layer(Assistants.layer.pipe(Layer.provide(Ids.layer), Layer.provideMerge(TestDatabase), Layer.provide(FileDatabase)), {
  timeout: "60 seconds"
})("assistants on PostgreSQL", (it) => {
  it.effect("A5: branches at one HEAD publishing the same change at once share one commit, no 500", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const organizationId = newId()
      yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${organizationId}, 'A5', now())`
      const fx = yield* newAssistant({}, organizationId)
      yield* fx.changeset("main", { nodes: { upsert: [llm("a")] } })
      yield* fx.publish("main", { message: "root" })
      const branches = ["b1", "b2", "b3", "b4"]
      for (const name of branches) {
        yield* fx.branch(name)
        yield* fx.changeset(name, { nodes: { upsert: [llm("same")] } })
      }
      // The TestClock stands still: same parent, files, message, author and time, so the same id.
      const published = yield* Effect.all(
        branches.map((name) => fx.branches.publish(fx.organizationId, fx.id, name, { message: "same" })),
        { concurrency: "unbounded" }
      )
      const ids = new Set(published.map((result) => result.commit.id))
      assert.strictEqual(ids.size, 1)
      for (const result of published) assert.deepStrictEqual(result.commit, published[0]!.commit)
      for (const name of branches) assert.strictEqual(yield* fx.head(name), published[0]!.commit.id)
      const version = yield* fx.versions.get(fx.organizationId, fx.id, published[0]!.commit.id)
      assert.deepStrictEqual(
        version.files.map((file) => file.path),
        ["context", "nodes/a", "nodes/same"]
      )
    })
  )
})
