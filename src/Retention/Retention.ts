/**
 * Retention (DECISIONS.md D21, issue 40 item 1): the service that sweeps what
 * the organizations' settings let go, and the worker-role sweeper that runs it
 * every `RETENTION_SWEEP_INTERVAL`.
 *
 * A sweep walks every organization with a retention in effect
 * (`RetentionRepo.policies`): its sessions closed more than
 * `message_retention_days` ago, with everything of them, and then its events
 * written more than `event_retention_days` ago with their deliveries, in
 * batches of one short transaction each (`Retention/Repo.ts`), until a batch
 * comes back short; the sweeper pauses after each batch as long as the batch
 * took ({@link PAUSE_PER_BATCH_TIME}). Days are whole days of 24 hours before the sweep's start
 * (`Clock`). It writes no event, adds what it deleted to
 * `parley.retention.deleted` (by `table`), and logs one INFO line with the
 * counts per table when it deleted anything. A failure in one organization is
 * logged (an outage once, O9) and the sweep goes on with the next.
 */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { AppConfig } from "../Config.ts"
import { DatabaseHealth, logUnlessOutage } from "../Database/Health.ts"
import { defaultSettings } from "../Domain/Organization.ts"
import * as Metrics from "../Telemetry/Metrics.ts"
import {
  type DeletedRows,
  EVENTS_PER_BATCH,
  RETENTION_TABLES,
  RetentionRepo,
  type RetentionTable,
  SESSIONS_PER_BATCH
} from "./Repo.ts"

/** Milliseconds in a retention day (D21: whole days). */
const DAY_MS = 86_400_000

/**
 * The sweeper's pause after each batch, as a share of the time the batch took
 * (D21: "other writes are not blocked"): 0.8 keeps a sweeper's connection busy
 * at most 56% of the time. Measured by `npm run bench -- lifecycle` (issue 40
 * item 5, bench/README.md): back to back, the neighbour's POST message p99
 * went to 2.8x its value alone; at 0.8 it stays at 1.30-1.43x while the sweep
 * deletes 20,000-24,000 rows/s beside it (at 1: 1.22-1.50x, 19,900-20,900).
 */
export const PAUSE_PER_BATCH_TIME = 0.8

/** The retention service (D21). */
export class Retention extends Context.Service<
  Retention,
  {
    /**
     * One sweep over every organization (see the module), its batches back to
     * back: returns the rows it deleted per table (absent: none). Never fails:
     * a failing organization is logged and skipped.
     */
    readonly sweep: Effect.Effect<DeletedRows>
    /**
     * The same sweep pausing after each batch for {@link PAUSE_PER_BATCH_TIME}
     * times the batch's duration (`Clock`), as the sweeper runs it.
     */
    readonly pacedSweep: Effect.Effect<DeletedRows>
    /**
     * Logs one WARN when the server runs without autovacuum: the rows a sweep
     * deletes then leave space PostgreSQL never reuses, and the tables grow
     * under a steady load (`npm run bench -- lifecycle`, bench/README.md).
     * Never fails (an unreachable database logs nothing here).
     */
    readonly warnWithoutAutovacuum: Effect.Effect<void>
  }
>()("parley/Retention") {
  /** The service without its repository. Requires `RetentionRepo` and `DatabaseHealth` (to log failures). */
  static readonly layerNoDeps = Layer.effect(
    Retention,
    Effect.gen(function* () {
      const repo = yield* RetentionRepo
      const health = yield* DatabaseHealth

      /** Adds `more` to `total`. */
      const add = (total: Record<string, number>, more: DeletedRows) => {
        for (const [table, n] of Object.entries(more)) total[table] = (total[table] ?? 0) + (n ?? 0)
      }

      /**
       * Runs `batch` until `last` says a batch came back short, adding what each
       * deleted to `total`; when `paced`, pauses between batches for
       * {@link PAUSE_PER_BATCH_TIME} times the last one's duration.
       */
      const batches = <B extends { readonly deleted: DeletedRows }>(
        batch: Effect.Effect<B, SqlError.SqlError>,
        last: (done: B) => boolean,
        total: Record<string, number>,
        paced: boolean
      ) =>
        Effect.gen(function* () {
          for (;;) {
            const started = yield* Clock.currentTimeMillis
            const done = yield* batch
            add(total, done.deleted)
            if (last(done)) return
            // Only between batches: a sweep with nothing (more) to delete never waits.
            if (paced) {
              const took = (yield* Clock.currentTimeMillis) - started
              yield* Effect.sleep(Duration.millis(took * PAUSE_PER_BATCH_TIME))
            }
          }
        })

      const sweepOf = (paced: boolean) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const before = (days: number) => new Date(now - days * DAY_MS).toISOString()
          const total: Record<string, number> = {}
          const policies = yield* Effect.catchCause(repo.policies(defaultSettings.event_retention_days), (cause) =>
            Effect.as(logUnlessOutage("Retention sweep failed", cause), [])
          )
          for (const policy of policies) {
            yield* Effect.gen(function* () {
              if (policy.message_retention_days !== null)
                yield* batches(
                  repo.deleteClosedSessions(policy.organization_id, before(policy.message_retention_days)),
                  (done) => done.finished && done.taken < SESSIONS_PER_BATCH,
                  total,
                  paced
                )
              if (policy.event_retention_days !== null)
                yield* batches(
                  repo.deleteEvents(policy.organization_id, before(policy.event_retention_days)),
                  (done) => done.taken < EVENTS_PER_BATCH,
                  total,
                  paced
                )
            }).pipe(
              Effect.catchCause((cause) =>
                logUnlessOutage(`Retention sweep failed for organization ${policy.organization_id}`, cause)
              )
            )
          }
          const deleted: DeletedRows = {}
          for (const table of RETENTION_TABLES) {
            const n = total[table]
            if (n === undefined || n === 0) continue
            deleted[table] = n
            yield* Metrics.record(Metrics.retentionDeleted, n, { table })
          }
          if (Object.keys(deleted).length > 0) yield* Effect.logInfo("Retention sweep deleted rows", deleted)
          return deleted
        }).pipe(Effect.withSpan("Retention.sweep"), Effect.provideService(DatabaseHealth, health))

      const warnWithoutAutovacuum = repo.autovacuum.pipe(
        Effect.flatMap((on) =>
          on
            ? Effect.void
            : Effect.logWarning(
                "autovacuum is off on the database server: the space retention frees is not reused until the tables are vacuumed (docs/operations.md, Retention)"
              )
        ),
        Effect.catchCause(() => Effect.void)
      )

      return Retention.of({ sweep: sweepOf(false), pacedSweep: sweepOf(true), warnWithoutAutovacuum })
    })
  )

  /** The service. Requires `SqlClient` and `DatabaseHealth`. */
  static readonly layer = Retention.layerNoDeps.pipe(Layer.provide(RetentionRepo.layer))
}

/**
 * The retention sweeper as a layer (D21, O1): in every process with
 * `PARLEY_ROLE` `all` or `worker`, a paced sweep every
 * `RETENTION_SWEEP_INTERVAL`, and after the first sweep that deleted anything
 * a WARN when the server runs without autovacuum
 * (the first one interval after start). Several processes may sweep at once:
 * their batches skip each other's rows. Its fiber stops with the layer's
 * scope. Requires `Retention` and `AppConfig`.
 */
export const RetentionSweeperLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const retention = yield* Retention
    const config = yield* AppConfig
    const interval = Duration.toMillis(config.retentionSweepInterval)
    // The check runs once, after the first sweep that deleted anything: a server without autovacuum matters
    // only where retention deletes.
    let checked = false
    const sweepThenCheck = Effect.flatMap(retention.pacedSweep, (deleted) => {
      if (checked || Object.keys(deleted).length === 0) return Effect.void
      checked = true
      return retention.warnWithoutAutovacuum
    })
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(interval), sweepThenCheck)))
  })
)

export type { DeletedRows, RetentionTable }
