/** Summary statistics of benchmark samples. */

/** The median of `values` (the upper one of the two middle values for an even count); NaN for none. */
export const median = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** The arithmetic mean of `values`; 0 for none. */
export const mean = (values: ReadonlyArray<number>): number =>
  values.reduce((a, b) => a + b, 0) / Math.max(values.length, 1)

/** The nearest-rank percentile `p` (0-100) of `sorted` (ascending); NaN when empty. */
export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

/** Runs `work` over `items` with at most `concurrency` in flight; the results in the items' order. */
export const pool = async <A, B>(items: ReadonlyArray<A>, concurrency: number, work: (item: A) => Promise<B>) => {
  const results: Array<B> = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++
        results[i] = await work(items[i]!)
      }
    })
  )
  return results
}
