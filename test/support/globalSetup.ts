/**
 * The test run's database server and template: the server of
 * `TEST_DATABASE_URL` when set (CI), else an embedded PostgreSQL started for
 * the run in a temporary directory (O2); on it a fresh database migrated once,
 * which every test file clones a database of its own from
 * (test/support/Database.ts). The template is dropped and the embedded server
 * stopped afterwards.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, ManagedRuntime, Redacted } from "effect"
import type { TestProject } from "vitest/node"
import * as Database from "../../src/Database/Database.ts"
import * as Embedded from "../../src/Database/Embedded.ts"
import type {} from "./Database.ts"
import { serversOf, urlOf } from "./Servers.ts"

export default async function setup(project: TestProject) {
  let serverUrl = process.env.TEST_DATABASE_URL
  let embedded: ManagedRuntime.ManagedRuntime<Embedded.EmbeddedDatabase, unknown> | undefined
  let dataDir: string | undefined
  if (serverUrl === undefined || serverUrl === "") {
    // A 0700 folder of its own: the embedded server reaches it as any user, root included (O10).
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-test-"))
    embedded = ManagedRuntime.make(Embedded.layer({ dataDir }))
    serverUrl = Redacted.value(
      (
        await embedded.runPromise(
          Effect.gen(function* () {
            return yield* Embedded.EmbeddedDatabase
          })
        )
      ).url
    )
  }
  // The migrated template every test file clones a database of its own from (test/support/Database.ts).
  const database = `parley_template_${process.pid}_${Date.now()}`
  const servers = await serversOf(serverUrl)
  await servers.create(database)
  const url = urlOf(serverUrl, database)
  await Effect.runPromise(
    Database.migrate.pipe(Effect.provide(Database.clientLayer(Redacted.make(url), 1)), Effect.scoped)
  )
  project.provide("serverUrl", serverUrl)
  project.provide("templateDatabase", database)
  process.stderr.write(
    `[parley tests] template database ${database} on ${embedded ? "an embedded PostgreSQL" : servers.nodes === undefined ? "TEST_DATABASE_URL" : `the Citus cluster of TEST_DATABASE_URL (${servers.nodes.length} nodes)`}\n`
  )

  return async () => {
    await servers.drop(database).catch(() => undefined)
    if (embedded !== undefined) await embedded.dispose()
    if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
  }
}
