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

/**
 * The wakeup of this process's delivery worker: `wake` sends one (wakeups
 * coalesce: one pending at most), `woken` waits for one; `attached` tells
 * whether a worker listens (it attaches for its lifetime with `attach`).
 */
export class DeliveryWakeup extends Context.Service<
  DeliveryWakeup,
  {
    /** Whether a delivery worker of this process is attached (started and not stopping). */
    readonly attached: () => boolean
    /** Attaches the calling worker until its scope closes. */
    readonly attach: Effect.Effect<void, never, Scope.Scope>
    /** Wakes the worker: it claims again (a no-op while a wakeup is pending). */
    readonly wake: () => void
    /** Waits for a wakeup (the worker's side). */
    readonly woken: Effect.Effect<void>
  }
>()("parley/Webhooks/DeliveryWakeup") {
  /** Wakeups of its own, no worker attached. */
  static readonly layer = Layer.effect(
    DeliveryWakeup,
    Effect.gen(function* () {
      const wakeups = yield* Queue.dropping<void>(1)
      let workers = 0
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
        wake: () => {
          Queue.offerUnsafe(wakeups, undefined)
        },
        woken: Queue.take(wakeups).pipe(Effect.asVoid)
      })
    })
  )
}
