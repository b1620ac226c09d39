/** Summary statistics of benchmark samples. */

/** The median of `values` (the upper one of the two middle values for an even count); NaN for none. */
export const median = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** The arithmetic mean of `values`; 0 for none. */
export const mean = (values: ReadonlyArray<number>): number =>
  values.reduce((a, b) => a + b, 0) / Math.max(values.length, 1)
