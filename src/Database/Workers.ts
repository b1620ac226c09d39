/**
 * What the background workers (webhook deliveries, reply jobs, schedules)
 * share: wakeups by LISTEN and graceful stopping (O5).
 */

import { PgClient } from "@effect/sql-pg"
import { Effect, Fiber, FiberSet, Queue } from "effect"
import { logUnlessOutage } from "./Health.ts"

/**
 * Calls `onNotification` for every NOTIFY on `channel` (and once when
 * listening starts, so a worker re-checks after a reconnect); after a lost
 * connection, logs `Listener lost: <channel>` and listens again after
 * `retryMs`. Runs until interrupted. Requires `PgClient`.
 */
export const listenForever = (channel: string, onNotification: () => void, retryMs: number) =>
  Effect.flatMap(PgClient.PgClient, (pg) =>
    Effect.scoped(
      Effect.gen(function* () {
        const notifications = yield* pg.listen(channel)
        onNotification()
        for (;;) {
          yield* Queue.take(notifications)
          onNotification()
        }
      })
    ).pipe(
      Effect.catchCause((cause) => logUnlessOutage(`Listener lost: ${channel}`, cause)),
      Effect.andThen(Effect.sleep(retryMs)),
      Effect.forever
    )
  )

/** How long work in flight may take to finish when a worker stops, in ms (O5). */
const SHUTDOWN_GRACE_MS = 10_000

/**
 * A worker's stop (O5), for its scope's finalizer: `stop()` makes the claim
 * loop return at its next check (it is never interrupted mid-statement, so no
 * lease is committed after the release), then the work in flight gets up to
 * {@link SHUTDOWN_GRACE_MS} (real time, also under a test clock), what is left
 * is interrupted, and `release` gives back the leases still held (5 s at most,
 * failures logged as `cannotRelease`).
 */
export const stopWorker = (options: {
  readonly stop: () => void
  readonly loop: Fiber.Fiber<unknown, unknown>
  readonly inFlight: () => number
  readonly work: FiberSet.FiberSet<unknown, unknown>
  readonly release: Effect.Effect<void, unknown>
  readonly cannotRelease: string
}) =>
  Effect.gen(function* () {
    options.stop()
    yield* Fiber.await(options.loop).pipe(Effect.timeout(5_000), Effect.ignore)
    yield* Fiber.interrupt(options.loop)
    const deadline = Date.now() + SHUTDOWN_GRACE_MS
    while (options.inFlight() > 0 && Date.now() < deadline) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    }
    const left = options.inFlight()
    yield* FiberSet.clear(options.work)
    yield* options.release.pipe(
      Effect.timeout(5_000),
      Effect.catchCause((cause) => Effect.logWarning(options.cannotRelease, cause))
    )
    return left
  })

/**
 * A worker of leased jobs that advance in steps (erasures D22, evaluations
 * A16), as a layer effect (O1, O5): claims a job (`claim`, under the
 * caller's lease), calls `advance` until it answers anything but `"more"`,
 * claims the next, and when none is left waits for a NOTIFY on `channel` or
 * `pollMs`. A failed step is logged (`<name> batch failed`, quiet during a
 * database outage) and the loop goes on; a crashed process's job is claimed
 * again once its lease expires. Shutdown: stop between steps (up to
 * `SHUTDOWN_GRACE_MS`), then `release` the leases still held. Requires `PgClient`.
 */
export const steppedJobWorker = <J>(options: {
  /** The job kind, for log lines: `Erasure`, `Evaluation`. */
  readonly name: string
  readonly channel: string
  readonly pollMs: number
  readonly claim: Effect.Effect<J | undefined>
  readonly advance: (job: J) => Effect.Effect<string>
  readonly release: Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    let stopping = false
    const wakeups = yield* Queue.dropping<void>(1)
    const wake = () => {
      Queue.offerUnsafe(wakeups, undefined)
    }

    /** Claims and advances jobs until none is waiting; returns then, or when it stops. */
    const drain = Effect.gen(function* () {
      while (!stopping) {
        const job = yield* options.claim
        if (job === undefined) return
        while (!stopping) {
          if ((yield* options.advance(job)) !== "more") break
        }
      }
    }).pipe(Effect.catchCause((cause) => logUnlessOutage(`${options.name} batch failed`, cause)))

    const loop = Effect.gen(function* () {
      while (!stopping) {
        yield* drain
        if (stopping) return
        yield* Queue.take(wakeups).pipe(Effect.timeout(options.pollMs), Effect.ignore)
      }
    })

    yield* Effect.forkScoped(listenForever(options.channel, wake, options.pollMs))
    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        wake()
        yield* Fiber.await(fiber).pipe(Effect.timeout(SHUTDOWN_GRACE_MS), Effect.ignore)
        yield* Fiber.interrupt(fiber)
        yield* options.release.pipe(
          Effect.timeout(5_000),
          Effect.catchCause((cause) =>
            Effect.logWarning(`Could not release ${options.name.toLowerCase()} leases`, cause)
          )
        )
      })
    )
  })

/**
 * Organizations a round of claims visits at most (O11; see
 * {@link makeOrganizationRotation}): one claim statement each. More wait for
 * a later round, which starts after the last one visited.
 */
export const DISCOVERED_ORGANIZATIONS = 16

/** The least organization id (all zeros): a rotation's cursor before its first round. */
export const FIRST_ORGANIZATION = "00000000-0000-0000-0000-000000000000"

/**
 * The claims of one worker across organizations (DECISIONS.md O11; used by the
 * webhook, reply, schedule, erasure and evaluation workers), in rounds:
 *
 * 1. `discover(after)`: a read without row locks of the organizations that
 *    have due work, at most a bounded number, in the order of their ids
 *    starting after the cursor `after` and wrapping around (so on Citus one
 *    multi-shard SELECT, which may take no row locks there);
 * 2. `claimOne(organizationId, limit)`: the worker's claim of that
 *    organization's rows, `FOR UPDATE SKIP LOCKED` under a lease (on Citus a
 *    router statement on the organization's shard, where row locks work), for
 *    each discovered organization in that order, each allowed an even share
 *    of what the round may still take (`ceil(left / organizations left)`:
 *    what an organization leaves goes to the next ones), until `limit`
 *    rows were taken (`limit` 1: until one organization yields one);
 * 3. the cursor moves to the last organization the round reached, so the
 *    next round starts with the following one.
 *
 * Why it is correct: every guarantee of a claim (a row leased to one worker
 * at a time, SKIP LOCKED, leases that expire, W7's queue heads, R1's one run
 * per job and session) concerns rows of one organization, and each claim is
 * the single-server statement restricted to that organization, so it keeps
 * them; discovery takes no lock and may be stale: an organization it missed
 * is found by the next round (the workers poll), and one whose work was
 * taken meanwhile costs an empty claim. Fairness: an organization with due
 * work is discovered in every round while the discovery's bound is not
 * reached, and otherwise within a few rounds as the cursor walks the ids;
 * each discovered organization gets a share of the round and the first
 * share (the largest) rotates, so one organization's backlog cannot starve
 * another. The same code runs on one server (one organization: a discovery
 * and one claim per round).
 */
export const makeOrganizationRotation = () => {
  let cursor = FIRST_ORGANIZATION
  return {
    /**
     * One round (see above): the rows claimed, at most `limit`, in the order
     * of the organizations claimed. Fails with what `discover` or
     * `claimOne` fail with.
     */
    claim: <A, E, R>(
      limit: number,
      discover: (after: string) => Effect.Effect<ReadonlyArray<string>, E, R>,
      claimOne: (organizationId: string, limit: number) => Effect.Effect<ReadonlyArray<A>, E, R>
    ): Effect.Effect<ReadonlyArray<A>, E, R> =>
      Effect.gen(function* () {
        if (limit <= 0) return []
        const organizations = yield* discover(cursor)
        const claimed: Array<A> = []
        for (let i = 0; i < organizations.length; i++) {
          const left = limit - claimed.length
          if (left <= 0) break
          const organizationId = organizations[i]!
          cursor = organizationId
          const rows = yield* claimOne(organizationId, Math.ceil(left / (organizations.length - i)))
          for (const row of rows) claimed.push(row)
        }
        return claimed
      })
  }
}
