/** Benchmark settings from the environment. */

/** A positive integer from `name`, else `fallback`; a bad value stops the run. */
export const envInt = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === "") return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`)
  return value
}

/** Whether `name` is set to 1/true/yes. */
export const envFlag = (name: string): boolean => /^(1|true|yes)$/i.test(process.env[name] ?? "")
