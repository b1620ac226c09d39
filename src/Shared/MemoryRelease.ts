/**
 * Gives memory back after a burst of load (issue 38 item 6). Measured with 50
 * connections of POST message for 20 s: the process's RSS went from about
 * 240 MB to 460-470 MB and stayed there, although the live heap after a full
 * collection is about 60 MB. The rest were V8 heap pages holding garbage of the
 * burst: once the load stops, too little is allocated to start another major
 * collection, so V8's memory reducer is never scheduled again. One
 * memory-reducing collection when the process has gone quiet brought the RSS
 * to 190 MB (commands and figures in bench/README.md, "Memory after load").
 *
 * So every {@link CHECK_INTERVAL_MS} the process looks at itself, and when it
 * was quiet ({@link isQuiet}) and its RSS grew by {@link GROWTH_BYTES} since the
 * last release (or the start), it runs that collection once ({@link shouldRelease}).
 * It pauses the process for some 10-100 ms, only while it is quiet.
 *
 * The start is such a burst too (issue 44): loading the modules, migrating and
 * building the layers leave the young generation grown to its bound and old
 * space full of garbage, so an idle process held about 225 MB, 155 MB after one
 * such collection (`npm run bench -- memory`, bench/README.md "memory"). So the
 * layer runs that collection once as it is built, with the application, before
 * the server takes requests.
 */
import { performance } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { Effect, Layer } from "effect"

/** How often the process looks at its memory (ms). */
const CHECK_INTERVAL_MS = 15_000

/** The event loop's utilization (0-1) over an interval below which the process counts as quiet. */
const QUIET_UTILIZATION = 0.05

/** RSS growth since the last release that is worth a collection (bytes). */
const GROWTH_BYTES = 64 * 1024 * 1024

/** What one look at the process saw. */
export interface MemorySample {
  /** The event loop's utilization since the previous look, 0-1 (`performance.eventLoopUtilization`). */
  readonly utilization: number
  /** The resident set size now, in bytes. */
  readonly rssBytes: number
  /** The resident set size after the last release (or the start's), in bytes. */
  readonly baselineBytes: number
}

/** Whether the process was quiet over the last interval: its event loop busy less than 5% of the time. */
export const isQuiet = (sample: MemorySample): boolean => sample.utilization < QUIET_UTILIZATION

/** Whether to run a memory-reducing collection now: quiet, and the RSS grew by 64 MiB or more since the baseline. */
export const shouldRelease = (sample: MemorySample): boolean =>
  isQuiet(sample) && sample.rssBytes - sample.baselineBytes >= GROWTH_BYTES

/** A memory-reducing major collection: the most V8 gives back. */
type Collect = (options: { readonly type: "major"; readonly execution: "sync"; readonly flavor: "last-resort" }) => void

/**
 * V8's `gc` function, without `--expose-gc` on the command line (the flag
 * only makes the function visible to contexts created after it is set), made
 * on the first release.
 */
let collect: Collect | undefined
const collectGarbage: Collect = (options) => {
  if (collect === undefined) {
    v8.setFlagsFromString("--expose-gc")
    collect = vm.runInNewContext("gc") as Collect
  }
  collect(options)
}

/**
 * One memory-reducing collection after `after` (the start, or load), logged at
 * debug level with the RSS before (`rssBytes`) and after; returns the RSS
 * after, in bytes: the new baseline.
 */
const release = (after: string, rssBytes: number) =>
  Effect.suspend(() => {
    collectGarbage({ type: "major", execution: "sync", flavor: "last-resort" })
    const releasedBytes = process.memoryUsage.rss()
    return Effect.as(
      Effect.logDebug(
        `Memory released after ${after}: RSS ${Math.round(rssBytes / 1048576)} MB -> ${Math.round(releasedBytes / 1048576)} MB`
      ),
      releasedBytes
    )
  })

/**
 * The check described in the module docs, forked for the process's lifetime;
 * a release is logged at debug level with the RSS before and after
 * (`Memory released after the start: ...`, then `... after load: ...`).
 */
export const MemoryReleaseLive = Layer.effectDiscard(
  Effect.gen(function* () {
    // The start's garbage, once, while the application is being built: before the server takes requests,
    // so none waits for it (a release at the first quiet second after the start could land between a
    // client's first requests).
    let baselineBytes = yield* release("the start", process.memoryUsage.rss())
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        let previous = performance.eventLoopUtilization()
        for (;;) {
          yield* Effect.sleep(CHECK_INTERVAL_MS)
          const now = performance.eventLoopUtilization()
          const sample = {
            utilization: performance.eventLoopUtilization(now, previous).utilization,
            rssBytes: process.memoryUsage.rss(),
            baselineBytes
          }
          previous = now
          if (!shouldRelease(sample)) {
            // A lower RSS (V8 released pages itself) is the new baseline.
            baselineBytes = Math.min(baselineBytes, sample.rssBytes)
            continue
          }
          baselineBytes = yield* release("load", sample.rssBytes)
        }
      })
    )
  })
)
