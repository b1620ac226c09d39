/**
 * The runtime repository in memory (`RuntimeRepo.layerTest`, issue 13 item
 * 8): run records in the `runs` table of a {@link MemoryDatabase}, and its
 * transactions, so a fast test of the `Runtime` service sees a turn's
 * messages, session changes and run record commit together or roll back
 * together, as over PostgreSQL.
 */
import { type MemoryDatabase, memoryStatement, memoryTransaction } from "../Database/Memory.ts"
import type { RuntimeRepo } from "./Repo.ts"

/** The repository over `db` (see module docs). */
export const makeMemoryRepo = (db: MemoryDatabase): RuntimeRepo["Service"] => ({
  withTransaction: memoryTransaction(db),
  insertRun: (run) =>
    memoryStatement(db, () => {
      db.runs.push(structuredClone(run))
    })
})
