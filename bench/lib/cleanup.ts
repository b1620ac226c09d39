/**
 * Teardown steps run once, last registered first, on normal completion, on
 * failure and on SIGINT/SIGTERM (child processes killed, database dropped,
 * embedded PostgreSQL stopped).
 */
export interface Cleanup {
  /** Registers a step; returns a function that runs it early (and unregisters it). */
  readonly add: (name: string, step: () => Promise<unknown>) => () => Promise<void>
  readonly run: () => Promise<void>
}

export const makeCleanup = (): Cleanup => {
  const steps: Array<{ readonly name: string; readonly step: () => Promise<unknown> }> = []
  const runStep = async (entry: { readonly name: string; readonly step: () => Promise<unknown> }) => {
    const index = steps.indexOf(entry)
    if (index < 0) return
    steps.splice(index, 1)
    try {
      await entry.step()
    } catch (error) {
      process.stderr.write(`[bench] cleanup "${entry.name}" failed: ${String(error)}\n`)
    }
  }
  const run = async () => {
    process.removeListener("SIGINT", onSignal)
    process.removeListener("SIGTERM", onSignal)
    while (steps.length > 0) await runStep(steps[steps.length - 1]!)
  }
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`\n[bench] ${signal}: cleaning up\n`)
    void run().then(() => process.exit(130))
  }
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  return {
    add: (name, step) => {
      const entry = { name, step }
      steps.push(entry)
      return () => runStep(entry)
    },
    run
  }
}
