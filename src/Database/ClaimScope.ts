/**
 * Test isolation for the background workers (webhook deliveries, reply jobs,
 * schedules): when set, a worker claims only work of the organizations it
 * answers, because in-process test files share one database with other files'
 * workers. Unset (the default) in the application, where every process claims
 * everything.
 */
import { Context } from "effect"

/** The organizations a worker may claim work of, or undefined for all (the default). */
export const ClaimScope = Context.Reference<(() => ReadonlyArray<string>) | undefined>("parley/ClaimScope", {
  defaultValue: () => undefined
})
