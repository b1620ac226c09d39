/**
 * What storage can hold (DECISIONS.md D17, D18): one owner for every input
 * limit, used by the request schemas of every domain and by the request guard
 * of the HTTP layer (`src/Http.ts`), so an input PostgreSQL cannot store is a
 * 422 and never a 500.
 *
 * - Strings: no NUL character (U+0000) and no lone surrogate, anywhere in a
 *   body, path or query (`type: "string_invalid"`): PostgreSQL `text` and
 *   `jsonb` hold neither.
 * - Free-form JSON members (metadata, content, config, parameters,
 *   default_value, snapshot, context) nest at most {@link MAX_JSON_DEPTH}
 *   levels (`type: "too_deep"`).
 * - Integers fit the column that stores them (`type: "out_of_range"`).
 * - Datetimes are real calendar moments between years 1 and 9999 in UTC.
 *
 * Every walk here is iterative, so input nested 10,000 levels deep cannot
 * overflow the stack. The checks apply to requests only: items stored before a
 * limit existed stay readable and editable.
 */
import { Schema } from "effect"

declare module "effect/Schema" {
  namespace Annotations {
    interface Augment {
      /**
       * The `type` of the validation entry (DECISIONS.md "Errors") when this
       * filter fails: `too_deep`, `out_of_range`, ... (`Domain/Validation.ts`).
       */
      readonly issueType?: string | undefined
    }
  }
}

/** Most levels of nesting of a free-form JSON member: `{}` is 1, `{"a": {}}` is 2 (D18). */
export const MAX_JSON_DEPTH = 32

/** The range of a PostgreSQL `integer` column (D18). */
const INT32_MIN = -2_147_483_648
const INT32_MAX = 2_147_483_647

/** The `msg` of a string PostgreSQL cannot store (D18). */
export const STRING_INVALID_MESSAGE = "String must not contain a NUL character (U+0000) or a lone surrogate"

/** Whether `text` can be stored: no NUL and no lone surrogate (D18). */
export const isStorableString = (text: string): boolean => text.isWellFormed() && !text.includes("\u0000")

/** A step of the walk below: a value, and how it was reached (the path is rebuilt only for what is reported). */
interface Step {
  readonly value: unknown
  readonly parent: Step | undefined
  readonly key: string | number | undefined
}

/** Longest path reported: deeper input (refused anyway) is named by its first segments. */
const MAX_PATH = 64

const pathOf = (step: Step | undefined, last?: string): Array<string | number> => {
  const path: Array<string | number> = last === undefined ? [] : [last]
  for (let at = step; at?.key !== undefined; at = at.parent) path.push(at.key)
  return path.reverse().slice(0, MAX_PATH)
}

/** Most problems one walk reports (the rest of a hostile body adds nothing). */
const MAX_REPORTED = 100

/**
 * The paths of the strings (object keys included) in the JSON value `value`
 * that cannot be stored (D18), at most {@link MAX_REPORTED}; a key's own path
 * is reported for a bad key. Linear in the size of `value` at any depth: no
 * recursion, and paths are built only for what is reported.
 */
export const unstorableStringPaths = (value: unknown): Array<ReadonlyArray<string | number>> => {
  const found: Array<ReadonlyArray<string | number>> = []
  const stack: Array<Step> = [{ value, parent: undefined, key: undefined }]
  while (stack.length > 0 && found.length < MAX_REPORTED) {
    const step = stack.pop()!
    const current = step.value
    if (typeof current === "string") {
      if (!isStorableString(current)) found.push(pathOf(step))
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], parent: step, key: i })
    } else if (typeof current === "object" && current !== null) {
      const keys = Object.keys(current)
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!
        if (!isStorableString(key)) found.push(pathOf(step, key))
        else stack.push({ value: (current as Record<string, unknown>)[key], parent: step, key })
      }
    }
  }
  return found
}

/**
 * Whether the JSON value `value` nests deeper than `max` levels (objects and
 * arrays count; scalars do not). Stops at the first branch past `max`; no
 * recursion.
 */
export const nestsDeeperThan = (value: unknown, max: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    const level = depth + 1
    if (level > max) return true
    const children = Array.isArray(current) ? current : Object.values(current)
    for (const child of children) if (typeof child === "object" && child !== null) stack.push([child, level])
  }
  return false
}

/** The D18 depth check of a free-form member, as a schema filter (`type: "too_deep"`). */
export const isShallowJson = <T>() =>
  Schema.makeFilter<T>(
    (value) => !nestsDeeperThan(value, MAX_JSON_DEPTH) || `JSON must be nested at most ${MAX_JSON_DEPTH} levels deep`,
    { expected: `JSON nested at most ${MAX_JSON_DEPTH} levels deep`, issueType: "too_deep" }
  )

/** An integer that fits a PostgreSQL `integer` column (D18, `type: "out_of_range"`). */
export const Int32 = Schema.Int.pipe(
  Schema.check(
    Schema.makeFilter<number>(
      (n) => (n >= INT32_MIN && n <= INT32_MAX) || `Input should be between ${INT32_MIN} and ${INT32_MAX}`,
      { expected: "a 32-bit integer", issueType: "out_of_range" }
    )
  )
)

/** Days of each month of a year (leap years included). */
const daysIn = (year: number, month: number) =>
  month === 2
    ? year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
      ? 29
      : 28
    : [4, 6, 9, 11].includes(month)
      ? 30
      : 31

/** ISO 8601 with a time zone: date, `T`, hours and minutes, optional seconds and fraction, `Z` or an offset. */
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?([Zz]|([+-])(\d{2}):?(\d{2}))$/

/** The first moment of year 1 and the last moment of year 9999, in UTC (ms since the epoch). */
const FIRST_MOMENT = new Date("0001-01-01T00:00:00Z").getTime()
const LAST_MOMENT = new Date("9999-12-31T23:59:59.999Z").getTime()

/**
 * Reads an ISO 8601 datetime with a time zone (`2026-11-22T08:02:07.123456Z`,
 * `...+01:00`): a real calendar date and time, between years 1 and 9999 in UTC
 * (D18). Returns the moment (ms since the epoch; digits past milliseconds are
 * kept by the caller's text only) or the reason it is refused.
 */
export const readDateTime = (
  text: string
):
  | { readonly ok: true; readonly millis: number }
  | { readonly ok: false; readonly type: string; readonly msg: string } => {
  const match = DATETIME.exec(text)
  if (match === null) {
    return { ok: false, type: "datetime_parsing", msg: "Input should be a valid ISO 8601 datetime with a time zone" }
  }
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(match[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  const offsetHours = Number(match[10] ?? 0)
  const offsetMinutes = Number(match[11] ?? 0)
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysIn(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    offsetHours > 23 ||
    offsetMinutes > 59
  ) {
    return { ok: false, type: "datetime_parsing", msg: "Input should be a valid ISO 8601 datetime with a time zone" }
  }
  const fraction = match[7] === undefined ? 0 : Number(`0.${match[7]}`) * 1000
  const local = new Date(0)
  local.setUTCFullYear(year, month - 1, day)
  local.setUTCHours(hour, minute, second, Math.floor(fraction))
  const sign = match[9] === "-" ? -1 : 1
  const millis = local.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000
  if (millis < FIRST_MOMENT || millis > LAST_MOMENT) {
    return { ok: false, type: "out_of_range", msg: "Datetime should be between years 1 and 9999 in UTC" }
  }
  return { ok: true, millis }
}
