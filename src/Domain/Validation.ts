/**
 * Turns a Schema issue tree into the validation form of DECISIONS.md "Errors":
 * one `{loc, msg, type}` entry per problem, `loc` prefixed with `body`, `query`
 * or `path`, `type` in the vocabulary integrators know from FastAPI/pydantic
 * (`missing`, `string_type`, `literal_error`, `less_than_equal`, ...).
 */

import type { SchemaIssue } from "effect"
import { SchemaAST } from "effect"
import { NoBody } from "./Common.ts"
import type { ValidationIssue } from "./Errors.ts"

type Loc = Array<string | number>
type Out = Array<ValidationIssue>
/** An issue as the walk finds it: `bound` when a bound of the value broke (a minimum, a maximum, a range). */
type Entry = ValidationIssue & { readonly bound?: true }

/** The message HttpApiBuilder puts on a body that is not valid JSON. */
const INVALID_JSON_MESSAGE = "Expected a valid JSON body"

const segment = (key: PropertyKey): string | number => (typeof key === "number" ? key : String(key))

const representationId = (check: unknown): string | undefined =>
  (check as { annotations?: { representation?: { id?: string } } }).annotations?.representation?.id

const hasCheck = (ast: SchemaAST.AST, id: string): boolean =>
  (ast.checks ?? []).some((check) => representationId(check) === id)

/** `undefined`, `null`, or the absent body of an optional one ({@link NoBody}): alternatives no value is reported against. */
const isNullish = (ast: SchemaAST.AST) => SchemaAST.isUndefined(ast) || SchemaAST.isNull(ast) || ast === NoBody.ast

const formatLiteral = (value: unknown) => (typeof value === "string" ? `'${value}'` : String(value))

const typeIssue = (ast: SchemaAST.AST): { type: string; msg: string } => {
  if (SchemaAST.isUnion(ast)) {
    const members = ast.types.filter((member) => !isNullish(member))
    if (members.length > 0 && members.every(SchemaAST.isLiteral)) {
      const literals = members.map((member) => formatLiteral((member as SchemaAST.Literal).literal))
      const text =
        literals.length === 1 ? literals[0]! : `${literals.slice(0, -1).join(", ")} or ${literals[literals.length - 1]}`
      return { type: "literal_error", msg: `Input should be ${text}` }
    }
    if (members[0] !== undefined) return typeIssue(members[0])
  }
  if (SchemaAST.isLiteral(ast)) return { type: "literal_error", msg: `Input should be ${formatLiteral(ast.literal)}` }
  if (SchemaAST.isString(ast)) return { type: "string_type", msg: "Input should be a valid string" }
  if (SchemaAST.isNumber(ast)) {
    return hasCheck(ast, "effect/schema/isInt")
      ? { type: "int_type", msg: "Input should be a valid integer" }
      : { type: "float_type", msg: "Input should be a valid number" }
  }
  if (SchemaAST.isBoolean(ast)) return { type: "bool_type", msg: "Input should be a valid boolean" }
  if (SchemaAST.isArrays(ast)) return { type: "list_type", msg: "Input should be a valid list" }
  if (SchemaAST.isObjects(ast)) return { type: "dict_type", msg: "Input should be a valid dictionary" }
  return { type: "value_error", msg: "Invalid value" }
}

/** The message of a filter's own issue (`makeFilter` predicates returning a sentence), if any. */
const innerMessage = (issue: SchemaIssue.Issue): string | undefined => {
  const message = issue._tag === "InvalidValue" ? issue.annotations?.message : undefined
  return typeof message === "string" ? message : undefined
}

const filterIssue = (
  filter: SchemaAST.Filter<unknown>,
  target: SchemaAST.AST | undefined,
  inner: SchemaIssue.Issue
): Omit<Entry, "loc"> => {
  const annotations = filter.annotations as
    | {
        message?: string
        expected?: string
        issueType?: string
        representation?: { id?: string; payload?: Record<string, unknown> }
      }
    | undefined
  const payload = annotations?.representation?.payload ?? {}
  // Parley's own filters (Domain/Limits.ts) name their `type` and give their sentence.
  if (annotations?.issueType !== undefined) {
    return {
      type: annotations.issueType,
      msg: innerMessage(inner) ?? annotations.message ?? `Expected ${annotations.expected ?? "a valid value"}`,
      ...(annotations.issueType === "out_of_range" ? { bound: true as const } : {})
    }
  }
  switch (annotations?.representation?.id) {
    case "effect/schema/isLessThanOrEqualTo":
      return { type: "less_than_equal", msg: `Input should be less than or equal to ${payload.maximum}`, bound: true }
    case "effect/schema/isLessThan":
      return { type: "less_than", msg: `Input should be less than ${payload.exclusiveMaximum}`, bound: true }
    case "effect/schema/isGreaterThanOrEqualTo":
      return {
        type: "greater_than_equal",
        msg: `Input should be greater than or equal to ${payload.minimum}`,
        bound: true
      }
    case "effect/schema/isGreaterThan":
      return { type: "greater_than", msg: `Input should be greater than ${payload.exclusiveMinimum}`, bound: true }
    case "effect/schema/isBetween":
      return {
        type: "value_error",
        msg: `Input should be between ${payload.minimum} and ${payload.maximum}`,
        bound: true
      }
    case "effect/schema/isInt":
      return { type: "int_from_float", msg: "Input should be a valid integer, got a number with a fractional part" }
    case "effect/schema/isStringFinite":
      return target && hasCheck(target, "effect/schema/isInt")
        ? { type: "int_parsing", msg: "Input should be a valid integer, unable to parse string as an integer" }
        : { type: "float_parsing", msg: "Input should be a valid number, unable to parse string as a number" }
    case "effect/schema/isMinLength":
      return payload.minLength === 1
        ? { type: "string_too_short", msg: "String should have at least 1 character" }
        : { type: "string_too_short", msg: `String should have at least ${payload.minLength} characters` }
    case "effect/schema/isMaxLength":
      return { type: "string_too_long", msg: `String should have at most ${payload.maxLength} characters` }
    case "effect/schema/isBetweenLength":
      return {
        type: "string_length",
        msg: `String should have between ${payload.minimum} and ${payload.maximum} characters`
      }
    default:
      return {
        type: "value_error",
        msg: annotations?.message ?? (annotations?.expected ? `Expected ${annotations.expected}` : "Invalid value")
      }
  }
}

const walk = (
  issue: SchemaIssue.Issue,
  loc: Loc,
  out: Array<Entry>,
  target?: SchemaAST.AST,
  encodedTo?: SchemaAST.AST
): void => {
  switch (issue._tag) {
    case "Pointer":
      walk(issue.issue, [...loc, ...issue.path.map(segment)], out)
      return
    case "Composite":
      for (const inner of issue.issues) walk(inner, loc, out, issue.ast, encodedTo)
      return
    case "Encoding":
      walk(issue.issue, loc, out, issue.ast, issue.ast)
      return
    case "AnyOf": {
      // A body matching neither its schema nor NoBody (`null`, `[]`) is reported as any other body that is not an object.
      const issues = issue.issues.filter((inner) => !(inner._tag === "InvalidType" && inner.ast === NoBody.ast))
      if (issues.length > 0) {
        for (const inner of issues) walk(inner, loc, out, target, encodedTo)
        return
      }
      out.push({ loc, ...typeIssue(issue.ast) })
      return
    }
    case "Filter":
      out.push({ loc, ...filterIssue(issue.filter, encodedTo ?? target, issue.issue) })
      return
    case "MissingKey":
      out.push({ loc, msg: "Field required", type: "missing" })
      return
    case "UnexpectedKey":
      out.push({ loc, msg: "Extra inputs are not permitted", type: "extra_forbidden" })
      return
    case "InvalidType":
      out.push({ loc, ...typeIssue(issue.ast) })
      return
    case "InvalidValue": {
      const message = issue.annotations?.message
      if (message === INVALID_JSON_MESSAGE) out.push({ loc, msg: "Invalid JSON", type: "json_invalid" })
      else out.push({ loc, msg: typeof message === "string" ? message : "Invalid value", type: "value_error" })
      return
    }
    case "Forbidden":
    case "OneOf":
      out.push({ loc, msg: "Invalid value", type: "value_error" })
      return
  }
}

/**
 * Every problem of `issue` as `{loc, msg, type}` entries, each `loc` starting
 * with `prefix` (for example `["body"]` or `["body", "content"]`).
 */
export const validationIssues = (issue: SchemaIssue.Issue, prefix: ReadonlyArray<string | number>): Out => {
  const out: Array<Entry> = []
  walk(issue, [...prefix], out)
  return dedupeIssues(withoutIntegerIssuesOutOfBounds(out))
}

/**
 * `entries` as issues, without an `int_from_float` issue where the same `loc`
 * also broke a bound (a minimum, a maximum, a range, a column's range): a
 * number out of its bounds is reported by its bound alone. Beyond 2^53
 * (`limit=99999999999999999999`) Effect's integer check fails as well, and
 * "got a number with a fractional part" would mislead.
 */
const withoutIntegerIssuesOutOfBounds = (entries: ReadonlyArray<Entry>): Out => {
  const bounded = new Set(entries.filter((entry) => entry.bound === true).map((entry) => JSON.stringify(entry.loc)))
  return entries
    .filter((entry) => entry.type !== "int_from_float" || !bounded.has(JSON.stringify(entry.loc)))
    .map(({ loc, msg, type }) => ({ loc, msg, type }))
}

/** `issues` without repeats of the same `loc` and `type`, first kept. */
export const dedupeIssues = (issues: ReadonlyArray<ValidationIssue>): Out => {
  const seen = new Set<string>()
  return issues.filter((issue) => {
    const key = JSON.stringify([issue.loc, issue.type])
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
