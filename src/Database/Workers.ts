/**
 * What the background workers (webhook deliveries, reply jobs, schedules)
 * share: wakeups by LISTEN and graceful stopping (O5).
 */

import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Exit, Fiber, FiberSet, Queue } from "effect"
import { logUnlessOutage } from "./Health.ts"

/**
 * Calls `onNotification` with the payload of every NOTIFY on `channel` (and
 * once with `undefined` when listening starts, so a worker re-checks after a
 * reconnect); after a lost connection, logs `Listener lost: <channel>` and
 * listens again after `retryMs`. Runs until interrupted. Requires `PgClient`.
 */
export const listenForever = (channel: string, onNotification: (payload?: string) => void, retryMs: number) =>
  Effect.flatMap(PgClient.PgClient, (pg) =>
    Effect.scoped(
      Effect.gen(function* () {
        const notifications = yield* pg.listen(channel)
        onNotification(undefined)
        for (;;) {
          onNotification((yield* Queue.take(notifications)).payload)
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

/**
 * How often, in ms, a rotation whose rounds are told where to look (`hinted`,
 * `everywhere: false`: the webhook worker) still discovers while it claims: at
 * most this long after its last discovery (O11). The webhook worker's claims
 * otherwise look only where its wakeups point; this bounds how long work no
 * wakeup named (another process's retries, a lost notification) waits while
 * the worker is busy. An idle worker discovers at its poll.
 */
export const DISCOVERY_INTERVAL_MS = 100

/** The least organization id (all zeros): a rotation's cursor before its first round. */
export const FIRST_ORGANIZATION = "00000000-0000-0000-0000-000000000000"

/**
 * The claims of one worker across organizations (DECISIONS.md O11; used by the
 * webhook, reply, schedule, erasure and evaluation workers), in rounds:
 *
 * 1. `discover(after)`: a read without row locks of the organizations that
 *    have due work, at most a bounded number, in the order of their ids
 *    starting after the cursor `after` and wrapping around (on Citus one
 *    multi-shard SELECT, which may take no row locks there). A round runs it
 *    unless told where to look (`everywhere: false`, with the organizations
 *    its wakeups named as `hinted`): then only when it knows of no
 *    organization to claim or its last discovery is
 *    {@link DISCOVERY_INTERVAL_MS} old (a wakeup naming the organization of a
 *    write then costs one claim statement, as on one server before O11);
 * 2. `claimOne(organizationId, limit)`: the worker's claim of that
 *    organization's rows, `FOR UPDATE SKIP LOCKED` under a lease (on Citus a
 *    router statement on the organization's shard, where row locks work).
 *    The organizations known to have work (found by a discovery or `hinted`,
 *    and not yet claimed short of their share since), and those the
 *    caller has work of in flight (`inFlight`: a discovery that skips what
 *    the worker cannot take now may miss them, and they are the likeliest
 *    to have more), are claimed at once, at most `limit` of them, at the
 *    same time as this round's discovery (one round trip on
 *    one server with one organization, as the single statement it replaces),
 *    each a share of `limit` (an even split; the extra rows of an uneven one
 *    go to those first after the share cursor); then the organizations this
 *    round's discovery found that were not claimed yet, one after the other,
 *    each `ceil(left / organizations left)` of what is left (what one leaves
 *    goes to the next), until `limit` rows were taken (`limit` 1: until one
 *    organization yields one);
 * 3. the share cursor moves to the first organization the round claimed, so
 *    the next round starts with the following one, and the discovery's
 *    cursor to the last organization it found, so that more organizations
 *    than its bound are found in turn; an organization whose claim took less
 *    than asked is known no more (until found or hinted again).
 *
 * Why it is correct: every guarantee of a claim (a row leased to one worker
 * at a time, SKIP LOCKED, leases that expire, W7's queue heads, R1's one run
 * per job and session) concerns rows of one organization, and each claim is
 * the single-server statement restricted to that organization, so it keeps
 * them; which organizations are claimed only decides where a worker looks.
 * A discovery takes no lock and may be stale: an organization whose work was
 * taken meanwhile costs an empty claim, one it missed is found by the next
 * round (the workers poll), and one it finds is claimed in the same round. A
 * hint only adds where to look: a wrong one costs an empty claim, and work no
 * hint names is found by a discovery within {@link DISCOVERY_INTERVAL_MS} of
 * a busy worker's rounds or at an idle one's poll.
 * Fairness: an organization with due work is discovered in every round while
 * the discovery's bound is not reached, otherwise within a few rounds as the
 * cursor walks the ids; each discovered organization gets a share of the
 * next round and the larger shares rotate, so one organization's backlog
 * cannot starve another. The same code runs on one server.
 */
export const makeOrganizationRotation = () => {
  /** Where the next discovery starts: after the last organization the previous one found. */
  let discoveryCursor = FIRST_ORGANIZATION
  /** Where the next round's order starts: after the first organization the previous round claimed. */
  let shareCursor = FIRST_ORGANIZATION
  /** Organizations known to have work: found or hinted, and not claimed short of their share since. */
  const known = new Set<string>()
  /** When the last discovery started (epoch ms of the effect clock). */
  let discoveredAt = Number.NEGATIVE_INFINITY
  /** `ids` from the share cursor on: those after it first, then the others, each in id order. */
  const fromCursor = (ids: ReadonlyArray<string>) => [
    ...ids.filter((id) => id > shareCursor).sort(),
    ...ids.filter((id) => id <= shareCursor).sort()
  ]
  return {
    /**
     * One round (see above): the rows claimed, at most `limit`. Options:
     * `inFlight`, the organizations the caller has work of in flight;
     * `hinted`, organizations its wakeups named; `everywhere` (default
     * true), whether the round must discover. Fails with what `discover` or
     * `claimOne` fail with, when nothing was claimed.
     */
    claim: <A, E, R>(
      limit: number,
      discover: (after: string) => Effect.Effect<ReadonlyArray<string>, E, R>,
      claimOne: (organizationId: string, limit: number) => Effect.Effect<ReadonlyArray<A>, E, R>,
      options: {
        readonly inFlight?: ReadonlyArray<string>
        readonly hinted?: ReadonlyArray<string>
        readonly everywhere?: boolean
      } = {}
    ): Effect.Effect<ReadonlyArray<A>, E, R> =>
      Effect.gen(function* () {
        if (limit <= 0) return []
        for (const id of options.hinted ?? []) known.add(id)
        const early = fromCursor([...new Set([...known, ...(options.inFlight ?? [])])]).slice(0, limit)
        const share = (i: number) => Math.floor(limit / early.length) + (i < limit % early.length ? 1 : 0)
        const now = yield* Clock.currentTimeMillis
        const discovering =
          options.everywhere !== false || early.length === 0 || now - discoveredAt >= DISCOVERY_INTERVAL_MS
        if (discovering) discoveredAt = now
        // Each runs to its end (none is interrupted by another's failure: a claim committed in the database would
        // then be lost to this worker until its lease expired); a failure fails the round only when nothing was
        // claimed, else the next round meets it again.
        const [found, earlyExits] = yield* Effect.all(
          [
            discovering ? Effect.exit(discover(discoveryCursor)) : Effect.succeed(undefined),
            Effect.forEach(early, (id, i) => Effect.exit(claimOne(id, share(i))), { concurrency: "unbounded" })
          ],
          { concurrency: "unbounded" }
        )
        const claimed: Array<A> = []
        earlyExits.forEach((exit, i) => {
          if (Exit.isSuccess(exit)) {
            claimed.push(...exit.value)
            if (exit.value.length < share(i)) known.delete(early[i]!)
          }
        })
        if (found !== undefined && Exit.isFailure(found))
          return claimed.length > 0 ? claimed : yield* Effect.failCause(found.cause)
        const failed = earlyExits.find(Exit.isFailure)
        if (failed !== undefined && Exit.isFailure(failed) && claimed.length === 0)
          return yield* Effect.failCause(failed.cause)
        const organizations = found?.value ?? []
        const asked = new Set(early)
        const later = fromCursor(organizations.filter((id) => !asked.has(id)))
        let first = early[0]
        for (let i = 0; i < later.length; i++) {
          const left = limit - claimed.length
          const organizationId = later[i]!
          if (left <= 0) {
            known.add(organizationId)
            continue
          }
          first ??= organizationId
          const asking = Math.ceil(left / (later.length - i))
          const rows = yield* claimOne(organizationId, asking)
          for (const row of rows) claimed.push(row)
          if (rows.length === asking) known.add(organizationId)
        }
        if (first !== undefined) shareCursor = first
        if (found !== undefined) discoveryCursor = organizations.at(-1) ?? FIRST_ORGANIZATION
        return claimed
      })
  }
}
