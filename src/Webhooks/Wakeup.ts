/**
 * Waking this process's delivery worker (DECISIONS.md W2, O1; issue 16 item 4).
 *
 * The writer of events whose fan-out made a delivery notifies every
 * process's worker (`pg_notify` on `parley_deliveries`, a statement of its
 * own: `Outbox.ts` `notifyDeliveries`, O11). PostgreSQL serializes the
 * commits of notifying transactions (each holds the notify queue's lock until
 * its commit is flushed), so on the hot path (POST message) a process whose
 * own delivery worker runs sends no notification (`MessagesRepo.insert`
 * `notify: false`) and wakes that worker here, in memory, after the
 * statement committed. Other processes find those deliveries by their 1 s
 * poll if this one dies before claiming them; every other write still notifies.
 *
 * Speed tactic measured by `npm run bench -- webhooks` (end to end, one app):
 * see bench/README.md "webhooks: delivery", and "Webhooks past Svix" and
 * "Without the notification on the hot path" in
 * `git show 73e3eb4:bench/README.md`.
 */
import { Context, Effect, Layer, Queue, type Scope } from "effect"
import { isUuid } from "../Domain/Common.ts"

/**
 * Where the delivery worker's next claim looks (O11, `Database/Workers.ts`
 * `makeOrganizationRotation`): the organizations the wakeups since the last
 * claim named, and whether one named none (`everywhere`: a poll, a listener
 * that just started, a writer of several organizations' events).
 */
export interface WakeupHints {
  readonly organizations: ReadonlyArray<string>
  readonly everywhere: boolean
}

/**
 * The wakeup of this process's delivery worker: `wake` sends one (wakeups
 * coalesce: one pending at most; the organizations they name accumulate until
 * `takeHints`), `woken` waits for one; `attached` tells whether a worker
 * listens (it attaches for its lifetime with `attach`).
 */
export class DeliveryWakeup extends Context.Service<
  DeliveryWakeup,
  {
    /** Whether a delivery worker of this process is attached (started and not stopping). */
    readonly attached: () => boolean
    /** Attaches the calling worker until its scope closes. */
    readonly attach: Effect.Effect<void, never, Scope.Scope>
    /**
     * Wakes the worker: it claims again (a no-op while a wakeup is pending).
     * `organizationId` (a NOTIFY's payload or the organization of a write)
     * names the organization with new deliveries; anything but a UUID (none,
     * an empty payload) makes the claim look in every organization.
     */
    readonly wake: (organizationId?: string) => void
    /** Waits for a wakeup (the worker's side). */
    readonly woken: Effect.Effect<void>
    /** What the wakeups since the last call named (the worker's side, before each claim); resets it. */
    readonly takeHints: () => WakeupHints
  }
>()("parley/Webhooks/DeliveryWakeup") {
  /** Wakeups of its own, no worker attached. */
  static readonly layer = Layer.effect(
    DeliveryWakeup,
    Effect.gen(function* () {
      const wakeups = yield* Queue.dropping<void>(1)
      let workers = 0
      let organizations = new Set<string>()
      let everywhere = false
      return DeliveryWakeup.of({
        attached: () => workers > 0,
        attach: Effect.acquireRelease(
          Effect.sync(() => {
            workers++
          }),
          () =>
            Effect.sync(() => {
              workers--
            })
        ),
        wake: (organizationId) => {
          if (organizationId !== undefined && isUuid(organizationId)) organizations.add(organizationId.toLowerCase())
          else everywhere = true
          Queue.offerUnsafe(wakeups, undefined)
        },
        woken: Queue.take(wakeups).pipe(Effect.asVoid),
        takeHints: () => {
          const hints = { organizations: [...organizations], everywhere }
          organizations = new Set()
          everywhere = false
          return hints
        }
      })
    })
  )
}
