/**
 * Property-based fuzz of every operation of `/openapi.json` (issue 12 item 2,
 * "A 500 never answers bad input"; DECISIONS.md D18, "Errors", W6).
 *
 * The operations are read from the running app's OpenAPI document, so a new
 * operation is fuzzed without touching this file. Each request is built from
 * the operation's schemas (`$ref`s resolved): path parameters from real
 * fixture ids, valid-looking UUIDs and junk; query parameters by their
 * documented names; a JSON body whose members are each valid-looking, nasty
 * but of the right type (NUL characters, lone surrogates, int32/int64 limits,
 * nesting up to 100,000 levels, impossible datetimes, private-network URLs) or
 * of the wrong type; sometimes an unknown member, a body that is not JSON, not
 * UTF-8 or of another content type. The response must never be 5xx, every 4xx
 * must be a JSON `{"detail": ...}`, and under the default configuration no app
 * may be created or moved to a private-network webhook URL (W6).
 *
 * Requests are generated up front by `fc.sample` from one seed (random per run,
 * printed, `FUZZ_SEED` to repeat; `FUZZ_RUNS` requests, default 8,000), every
 * operation in turn, and sent 8 at a time in chunks of 250; before each chunk
 * the fixtures requests use up (open sessions, the spare app, the legacy
 * assistant) are made anew. This is the batched equivalent of `fc.assert`,
 * which would stop at the first 500 and shrink against a server whose state
 * has moved on: every failing request is kept, and the failures are reported
 * once per distinct cause (operation, status, innermost logged error and its
 * first application frame) with a `curl` reproduction. The app's log is
 * captured per request (`x-fuzz-id` header) to name the cause.
 * `FUZZ_REPORT=<file>` also writes every failure, and per operation the
 * statuses responded with, as JSON.
 *
 * The file runs in its own vitest worker with its own organization (the
 * database is shared with the other test files) and starts no background
 * workers, so nothing it creates is processed after it ends.
 */
import * as fs from "node:fs"
import { assert } from "@effect/vitest"
import { Cause, Context, Effect, Layer, Logger } from "effect"
import { HttpServerRequest } from "effect/http"
import fc from "fast-check"
import { ServicesLive } from "../../src/Server.ts"
import {
  type Current,
  type Fixtures,
  makeFixtures,
  type Operation,
  operationsOf,
  type Parameter,
  PUBLIC_URL,
  resolveRefs,
  type Schema
} from "../support/ApiFixtures.ts"
import { ADMIN_TOKEN, TestApi, withApp } from "../support/TestApp.ts"

/** The operations of issue 12's fuzz run: a smaller document means the enumeration broke (or lower this on purpose). */
const EXPECTED_MIN_OPERATIONS = 75
const RUNS = Number(process.env.FUZZ_RUNS ?? 8000)
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31)
const CONCURRENCY = 8
/** A request without a response this long counts as a failure. */
const REQUEST_TIMEOUT_MS = 30_000

// ---------------------------------------------------------------------------
// JSON values as sent: `Raw` text for what JSON.stringify cannot write
// (-0, 9007199254740993, 1e400, nesting 100,000 deep), `Obj` for objects whose
// keys may be `__proto__` or repeat.

class Raw {
  readonly text: string
  readonly label: string
  constructor(text: string, label = text) {
    this.text = text
    this.label = label
  }
}

class Obj {
  readonly entries: ReadonlyArray<readonly [string, Json]>
  constructor(entries: ReadonlyArray<readonly [string, Json]>) {
    this.entries = entries
  }
}

type Json = null | boolean | number | string | Raw | Obj | ReadonlyArray<Json>

/** The JSON text of a value. */
const write = (value: Json): string => {
  if (value instanceof Raw) return value.text
  if (value instanceof Obj) return `{${value.entries.map(([k, v]) => `${JSON.stringify(k)}:${write(v)}`).join(",")}}`
  if (Array.isArray(value)) return `[${value.map(write).join(",")}]`
  return JSON.stringify(value)
}

/** A short, readable form of a value for reports: long strings and deep nesting abbreviated. */
const summary = (value: Json): string => {
  if (value instanceof Raw) return value.label
  if (value instanceof Obj) return `{${value.entries.map(([k, v]) => `${summary(k)}:${summary(v)}`).join(",")}}`
  if (Array.isArray(value)) return `[${value.map(summary).join(",")}]`
  if (typeof value === "string" && value.length > 60) {
    return `${JSON.stringify(value.slice(0, 24)).slice(0, -1)}…" (${value.length} chars)`
  }
  return JSON.stringify(value)
}

/** Plain JS values (from fc.jsonValue) as `Json`, keeping every key. */
const fromJs = (value: unknown): Json => {
  if (value === null || typeof value !== "object" || value instanceof Obj || value instanceof Raw) return value as Json
  if (Array.isArray(value)) return value.map(fromJs)
  return new Obj(Object.entries(value).map(([k, v]) => [k, fromJs(v)] as const))
}

const nested = (depth: number, open: string, close: string, leaf: string) =>
  open.repeat(depth) + leaf + close.repeat(depth)
const deepObject = (depth: number) => new Raw(nested(depth, '{"a":', "}", "1"), `<object nested ${depth} deep>`)
const deepArray = (depth: number) => new Raw(nested(depth, "[", "]", ""), `<array nested ${depth} deep>`)
const deepMixed = (depth: number) => new Raw(nested(depth, '[{"a":', "}]", "null"), `<[{…}] nested ${depth} deep>`)

/** Nesting around the D18 limit (32) and far past it; the deepest stays under MAX_BODY_BYTES (1 MiB). */
const DEEP: ReadonlyArray<Raw> = [
  deepObject(32),
  deepObject(33),
  deepObject(40),
  deepObject(1000),
  deepObject(10_000),
  deepArray(10_000),
  deepArray(100_000),
  deepMixed(5000)
]

// ---------------------------------------------------------------------------
// Junk

const NASTY_STRINGS: ReadonlyArray<string> = [
  "\u0000",
  "a\u0000b",
  "\u0000".repeat(100),
  "\ud800",
  "\udc00",
  "x\ud800y",
  "\udc00\ud800",
  "\ud83d",
  "\ud800".repeat(100),
  "😀",
  "",
  " ",
  "\n\r\t",
  "\u202e\u200b\ufeff",
  "\uffff\ufffe",
  "\u0001\u001f\u007f",
  "null",
  "undefined",
  "NaN",
  "true",
  "0",
  "-1",
  "%00",
  "%ED%A0%80",
  "\\u0000",
  "' OR '1'='1",
  "'; DROP TABLE sessions; --",
  "../../etc/passwd",
  "nodes/../config",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, sent as is
  "${jndi:ldap://x}",
  "<script>alert(1)</script>",
  "x".repeat(255),
  "x".repeat(256),
  "x".repeat(1025),
  "x".repeat(4097),
  "é".repeat(20_000),
  "x".repeat(70_000),
  "\u0000".repeat(5000),
  "\ud800".repeat(5000)
]

/** A string with a NUL or a lone surrogate somewhere in it. */
const taintedString = fc
  .tuple(
    fc.string({ maxLength: 12 }),
    fc.constantFrom("\u0000", "\ud800", "\udc00", "\udbff", "\udfff"),
    fc.string({ maxLength: 12 })
  )
  .map(([a, b, c]) => a + b + c)

const junkString: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  { weight: 4, arbitrary: taintedString },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 30 }) }
)

const NUMBERS: ReadonlyArray<Json> = [
  2147483647,
  2147483648,
  -2147483648,
  -2147483649,
  4294967296,
  9007199254740991,
  -9007199254740991,
  9007199254740992,
  new Raw("9007199254740993"),
  new Raw("-9007199254740993"),
  new Raw("9223372036854775807"),
  new Raw("9223372036854775808"),
  new Raw("-9223372036854775809"),
  new Raw(`1${"0".repeat(400)}`),
  1e308,
  -1e308,
  new Raw("1e400"),
  new Raw("-1e400"),
  new Raw("-0"),
  new Raw("0e0"),
  new Raw("1E2"),
  new Raw("100.0"),
  1.5,
  0.1,
  5e-324,
  -1,
  0,
  61,
  86400,
  31536000000
]
const junkNumber = fc.constantFrom(...NUMBERS)

const DATETIMES: ReadonlyArray<string> = [
  "0000-01-01T00:00:00Z",
  "0001-01-01T00:00:00Z",
  "-000001-01-01T00:00:00Z",
  "+010000-01-01T00:00:00Z",
  "10000-01-01T00:00:00Z",
  "+275760-09-13T00:00:00Z",
  "9999-12-31T23:59:59.999999Z",
  "9999-12-31T23:59:59.9999999Z",
  "9999-12-31T23:59:60Z",
  "2026-02-30T00:00:00Z",
  "2026-13-01T00:00:00Z",
  "2026-01-01T24:00:00Z",
  "2026-01-01T00:00:00+25:00",
  "2026-01-01T00:00:00-23:59",
  "2026-01-01T00:00:00",
  "2026-01-01",
  "1970-01-01T00:00:00Z",
  "1969-12-31T23:59:59.999Z",
  "2026-01-01T00:00:00\u0000Z",
  "2026-01-01T00:00:00Z\ud800",
  "now",
  "1e12",
  "1767225600",
  ""
]
const junkDatetime = fc.constantFrom(...DATETIMES)

/** Webhook URLs W6 refuses under the default configuration (loopback, private, link-local, metadata, not http). */
const PRIVATE_URLS: ReadonlyArray<string> = [
  "http://[::127.0.0.1]/",
  "http://[::7f00:1]/",
  "http://[::10.0.0.1]/",
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:7f00:1]/",
  "http://[::1]/",
  "http://[::]/",
  "http://[0:0:0:0:0:0:0:1]/",
  "http://[64:ff9b::7f00:1]/",
  "http://[2002:7f00:1::]/",
  "http://[fe80::1]/",
  "http://[fd00:ec2::254]/",
  "http://0x7f.1/",
  "http://0x7f000001/",
  "http://0177.0.0.1/",
  "http://2130706433/",
  "http://127.1/",
  "http://0/",
  "http://0.0.0.0/",
  "http://127.0.0.1:5432/",
  "http://localhost/",
  "http://10.0.0.1/",
  "http://100.64.0.1/",
  "http://169.254.169.254/latest/meta-data/",
  "http://192.168.0.1/",
  "http://224.0.0.1/",
  "http://255.255.255.255/",
  "file:///etc/passwd",
  "gopher://127.0.0.1:6379/_INFO",
  "ftp://93.184.215.14/",
  "javascript:alert(1)",
  "data:text/plain,hi"
]
const OTHER_BAD_URLS: ReadonlyArray<string> = [
  "http://user:pass@93.184.215.14/",
  "https://example.com/hook",
  "https://93.184.215.14/\u0000",
  "https://93.184.215.14/\ud800",
  "http://[::1",
  "http://",
  "//93.184.215.14/",
  "93.184.215.14",
  `https://93.184.215.14/${"x".repeat(2100)}`,
  "https://xn--nxasmq6b.invalid/",
  "HTTPS://93.184.215.14:65536/",
  "https://93.184.215.14:0/"
]
const privateUrl = new Set(PRIVATE_URLS)
const junkUrl = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...PRIVATE_URLS) },
  { weight: 1, arbitrary: fc.constantFrom(...OTHER_BAD_URLS) }
)

const junkKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "\u0000",
    "a\u0000b",
    "\ud800",
    "\udc00",
    "",
    "__proto__",
    "constructor",
    "toString",
    "valueOf",
    "hasOwnProperty",
    "x".repeat(300),
    "$ref"
  ),
  taintedString
)

const smallJson: fc.Arbitrary<Json> = fc.jsonValue({ maxDepth: 3 }).map(fromJs)

/** Any JSON, mostly nasty: wrong types, junk strings and numbers, deep nesting, objects with junk keys. */
const junkAny: fc.Arbitrary<Json> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom<Json>(null, true, false, 0, "", [], new Obj([]), [null], "string") },
  { weight: 3, arbitrary: junkString },
  { weight: 2, arbitrary: junkNumber },
  { weight: 1, arbitrary: junkDatetime },
  { weight: 1, arbitrary: junkUrl },
  { weight: 2, arbitrary: fc.constantFrom(...DEEP) },
  { weight: 1, arbitrary: fc.tuple(junkKey, junkString).map(([k, v]) => new Obj([[k, v]])) },
  { weight: 1, arbitrary: fc.array(junkString, { maxLength: 3 }) },
  { weight: 1, arbitrary: smallJson }
)

/** Extra members of open objects (content, tool requests, node configs): names the code may read, and junk keys. */
const EXTRA_KEYS = [
  "text",
  "url",
  "transcript",
  "mime_type",
  "name",
  "caption",
  "instructions",
  "model",
  "next_node",
  "tools",
  "headers",
  "body",
  "timeout_ms",
  "metadata",
  "routes"
]

/** Free-form members (metadata, config, context, parameters, default_value, snapshot): valid, junk keys, deep, big. */
const freeForm: fc.Arbitrary<Json> = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(fc.string({ maxLength: 10 }), smallJson, { maxKeys: 4 }).map(fromJs) },
  { weight: 2, arbitrary: fc.tuple(junkKey, junkAny).map(([k, v]) => new Obj([[k, v]])) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...EXTRA_KEYS), junkAny).map(([k, v]) => new Obj([[k, v]])) },
  { weight: 2, arbitrary: fc.constantFrom(...DEEP).map((deep) => new Obj([["deep", deep]])) },
  { weight: 1, arbitrary: fc.constantFrom(...DEEP.filter((deep) => deep.text.startsWith("{"))) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(200, 2000)
      .map((n) => new Obj(Array.from({ length: n }, (_, i) => [`k${i}`, "v".repeat(10)] as const)))
  },
  {
    weight: 1,
    arbitrary: fc.constant(new Raw('{"a":1,"a":{"b":"\\u0000"}}'))
  }
)

// ---------------------------------------------------------------------------
// Requests

/** A body as generated; `contentType: null` sends it without a content type. */
type Body =
  | { readonly _tag: "none" }
  | { readonly _tag: "json"; readonly value: Json; readonly contentType?: string | null }
  | { readonly _tag: "text"; readonly text: string; readonly label: string }
  | { readonly _tag: "bytes"; readonly bytes: Uint8Array; readonly label: string }

/** A request as generated (fixture references unresolved). */
interface FuzzRequest {
  readonly operation: Operation
  readonly method: string
  /** Path and query, percent-encoded. */
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Body
}

/** UTF-8 percent-encoding that also writes lone surrogates (as WTF-8, the bytes a careless client sends). */
const encode = (value: string): string => {
  try {
    return encodeURIComponent(value)
  } catch {
    let out = ""
    for (const char of value) {
      const code = char.codePointAt(0)!
      if (code >= 0xd800 && code <= 0xdfff) {
        out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
          .map((b) => `%${b.toString(16).toUpperCase()}`)
          .join("")
      } else {
        out += encodeURIComponent(char)
      }
    }
    return out
  }
}

/** Path segments and query values sent as they are: broken percent-encodings, NUL, surrogates, overlong forms. */
const RAW_SEGMENTS = [
  "%00",
  "a%00b",
  "%ED%A0%80",
  "%ED%B0%80",
  "%C0%80",
  "%FF",
  "%",
  "%zz",
  "%2F",
  "%2e%2e",
  "%E2%80%AE"
]

const uuidLike = fc.oneof(
  fc.uuid({ version: [4, 7] }),
  fc.constantFrom(
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "0190a000-0000-7000-8000-000000000000"
  )
)

const isDatetimeName = (name: string) => /(_at|_after|_before|_for|^since|^until)$/.test(name)

/**
 * How much of a body is junk: most requests are nearly valid (so they reach the
 * code behind validation), some half junk, some mostly junk.
 */
interface Level {
  readonly valid: number
  readonly nasty: number
  readonly junk: number
}
const LEVELS: ReadonlyArray<Level> = [
  { valid: 36, nasty: 4, junk: 1 },
  { valid: 12, nasty: 6, junk: 2 },
  { valid: 4, nasty: 8, junk: 8 }
]

interface Builder {
  readonly doc: any
  readonly fixtures: Fixtures
  readonly level: Level
}

const resolve = (b: Builder, schema: Schema): Schema => {
  let current = schema
  for (let i = 0; i < 20 && typeof current.$ref === "string"; i++) {
    current = b.doc.components.schemas[(current.$ref as string).replace("#/components/schemas/", "")] ?? {}
  }
  return current
}

const schemaTypes = (schema: Schema): ReadonlyArray<string> => {
  if (typeof schema.type === "string") return [schema.type]
  if (Array.isArray(schema.type)) return schema.type
  if (Array.isArray(schema.anyOf)) return schema.anyOf.flatMap(schemaTypes)
  if (schema.properties !== undefined || schema.allOf !== undefined) return ["object"]
  return []
}

/** A string named `name` that should pass validation: a fixture value, a datetime, an id or a short string. */
const validString = (fixtures: Fixtures, name: string, schema: Schema): fc.Arbitrary<string> => {
  const min = Math.max(schema.minLength ?? 0, 1)
  const plain = fc.string({ minLength: min, maxLength: Math.max(Math.min(schema.maxLength ?? 40, 40), min) })
  const pool = fixtures.pools[name]
  if (pool !== undefined && pool.length > 0) {
    return fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...pool) }, { weight: 1, arbitrary: plain })
  }
  if (isDatetimeName(name)) {
    return fc
      .date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true })
      .map((date) => date.toISOString())
  }
  if (name.endsWith("_id")) {
    const ids = [...new Set(Object.values(fixtures.pools).flat())]
    return fc.oneof(fc.constantFrom(...ids), uuidLike, plain)
  }
  return plain
}

/** Junk of the schema's own JSON type: it passes the type check and reaches the code behind it. */
const nastyFor = (name: string, schema: Schema): fc.Arbitrary<Json> => {
  const types = schemaTypes(schema)
  if (types.includes("string")) {
    if (isDatetimeName(name)) return fc.oneof(junkDatetime, junkString)
    if (/url$/.test(name)) return fc.oneof({ weight: 4, arbitrary: junkUrl }, { weight: 1, arbitrary: junkString })
    return junkString
  }
  if (types.includes("integer") || types.includes("number")) return junkNumber
  if (types.includes("object")) return freeForm
  if (types.includes("array")) return fc.array(junkAny, { minLength: 1, maxLength: 3 })
  return junkAny
}

/** A member value: valid-looking, nasty of its type, or anything, as the level weighs them. */
const member = (b: Builder, name: string, schema: Schema, depth: number): fc.Arbitrary<Json> =>
  fc.oneof(
    { weight: b.level.valid, arbitrary: valid(b, name, schema, depth) },
    { weight: b.level.nasty, arbitrary: nastyFor(name, resolve(b, schema)) },
    { weight: b.level.junk, arbitrary: junkAny }
  )

/** A string member: valid most of the time, else nasty. */
const mostlyValid = (valid: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: junkString })

/**
 * Valid values of component schemas whose document does not tell enough:
 * `ContentInput` is open (`{type, ...}`), its members are checked per type by
 * the service (conversations.md "Content types", D12).
 */
const HINTS: Readonly<Record<string, fc.Arbitrary<Json>>> = {
  ContentInput: fc.oneof(
    mostlyValid(fc.string({ minLength: 1, maxLength: 40 })).map(
      (t) =>
        new Obj([
          ["type", "text"],
          ["text", t]
        ])
    ),
    fc.tuple(fc.constantFrom("image", "video"), mostlyValid(fc.constant(PUBLIC_URL))).map(
      ([type, url]) =>
        new Obj([
          ["type", type],
          ["url", url]
        ])
    ),
    fc.tuple(mostlyValid(fc.constant(PUBLIC_URL)), mostlyValid(fc.string({ maxLength: 20 }))).map(
      ([url, transcript]) =>
        new Obj([
          ["type", "audio"],
          ["url", url],
          ["transcript", transcript]
        ])
    ),
    fc
      .tuple(
        mostlyValid(fc.constant(PUBLIC_URL)),
        mostlyValid(fc.constant("application/pdf")),
        mostlyValid(fc.constant("a.pdf"))
      )
      .map(
        ([url, mime, name]) =>
          new Obj([
            ["type", "file"],
            ["url", url],
            ["mime_type", mime],
            ["name", name]
          ])
      )
  )
}

const hintOf = (schema: Schema): fc.Arbitrary<Json> | undefined =>
  typeof schema.$ref === "string" ? HINTS[(schema.$ref as string).replace("#/components/schemas/", "")] : undefined

const freeFormValid: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 10 }), smallJson, { maxKeys: 4 }).map(fromJs) },
  { weight: 2, arbitrary: freeForm }
)

/** A value that should pass the schema (its members are `member`s; objects past a depth are empty). */
const valid = (b: Builder, name: string, unresolved: Schema, depth: number): fc.Arbitrary<Json> => {
  const hint = hintOf(unresolved)
  const schema = resolve(b, unresolved)
  if (hint !== undefined) {
    return fc.oneof({ weight: 4, arbitrary: hint }, { weight: 1, arbitrary: valid(b, name, schema, depth) })
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return fc.constantFrom(...(schema.enum as Array<Json>))
  if (Array.isArray(schema.anyOf) && schema.anyOf.length > 0) {
    return fc.oneof(...schema.anyOf.map((s: Schema) => valid(b, name, s, depth)))
  }
  switch (schemaTypes(schema)[0]) {
    case "object":
      if (depth > 8) return fc.constant(new Obj([]))
      return schema.properties !== undefined ? object(b, schema, depth) : freeFormValid
    case "string":
      return validString(b.fixtures, name, schema)
    case "integer": {
      const min = Math.max(schema.minimum ?? -(2 ** 31), -(2 ** 31))
      const max = Math.min(schema.maximum ?? 2 ** 31 - 1, 2 ** 31 - 1)
      return fc.oneof(fc.integer({ min, max }), fc.constantFrom(schema.minimum ?? 0, schema.maximum ?? 0))
    }
    case "number":
      return fc.double({ noNaN: true, noDefaultInfinity: true })
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array": {
      return fc.array(member(b, name, schema.items ?? {}, depth + 1), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(schema.minItems ?? 0, 3)
      })
    }
    default:
      // `{}`: any value (a variable's default_value).
      return fc.oneof(smallJson, freeForm)
  }
}

/** An object of the schema's properties: required ones mostly present, optional ones half the time, rarely extras. */
const object = (b: Builder, schema: Schema, depth: number): fc.Arbitrary<Json> => {
  const required = new Set<string>(schema.required ?? [])
  const open =
    schema.additionalProperties !== false ||
    (Array.isArray(schema.allOf) && schema.allOf.some((s: Schema) => s.additionalProperties !== false))
  const fields = Object.entries(schema.properties as Record<string, Schema>).map(([name, s]) =>
    fc
      .oneof(
        { weight: required.has(name) ? 39 : 10, arbitrary: member(b, name, s, depth + 1).map((v) => [v]) },
        { weight: required.has(name) ? 1 : 10, arbitrary: fc.constant([]) }
      )
      .map((present): ReadonlyArray<readonly [string, Json]> => present.map((v) => [name, v] as const))
  )
  const extras = fc.oneof(
    { weight: open ? 6 : 30, arbitrary: fc.constant<ReadonlyArray<readonly [string, Json]>>([]) },
    {
      weight: open ? 4 : 1,
      arbitrary: fc.array(fc.tuple(fc.constantFrom(...EXTRA_KEYS), fc.oneof(fc.string({ maxLength: 20 }), junkAny)), {
        minLength: 1,
        maxLength: 2
      })
    },
    { weight: 1, arbitrary: fc.array(fc.tuple(junkKey, junkAny), { minLength: 1, maxLength: 2 }) }
  )
  return fc.tuple(fc.tuple(...fields), extras).map(([present, extra]) => new Obj([...present.flat(), ...extra]))
}

const INVALID_UTF8 = [
  Uint8Array.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
  new Uint8Array([...Buffer.from('{"name":"'), 0xed, 0xa0, 0x80, ...Buffer.from('"}')]),
  new Uint8Array([...Buffer.from('{"name":"'), 0xc0, 0x80, ...Buffer.from('"}')])
]
const OVERSIZED = `{"x":"${"x".repeat(1_100_000)}"}`

/** A body that is not JSON, not UTF-8, not an object, nested too deep, too large, or of another content type. */
const junkBody = (validBody: fc.Arbitrary<Json>): fc.Arbitrary<Body> =>
  fc.oneof(
    fc.constantFrom(
      ...["", " ", "{not json", '{"a":', "null", "[]", "1", '"x"', "true", "\ufeff{}", '{"a":"\u0000"}', "{}{}"].map(
        (t): Body => ({ _tag: "text", text: t, label: JSON.stringify(t) })
      )
    ),
    fc.constantFrom(...DEEP).map((deep): Body => ({ _tag: "json", value: deep })),
    fc
      .constantFrom(...INVALID_UTF8)
      .map(
        (bytes): Body => ({ _tag: "bytes", bytes, label: `<invalid UTF-8: ${Buffer.from(bytes).toString("hex")}>` })
      ),
    fc
      .tuple(
        validBody,
        fc.constantFrom<string | null>(
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "application/json; charset=utf-16",
          "application/merge-patch+json",
          "APPLICATION/JSON",
          "application/jsonx",
          "",
          null
        )
      )
      .map(([value, contentType]): Body => ({ _tag: "json", value, contentType })),
    fc.constant<Body>({ _tag: "text", text: OVERSIZED, label: "<1.1 MB JSON>" })
  )

const requestOf = (doc: any, fixtures: Fixtures, operation: Operation): fc.Arbitrary<FuzzRequest> => {
  const builders = LEVELS.map((level): Builder => ({ doc, fixtures, level }))
  const b = builders[0]!
  const pathParams = operation.parameters.filter((p) => p.in === "path")
  const queryParams = operation.parameters.filter((p) => p.in === "query")

  const spares = {
    ...(operation.method === "DELETE"
      ? fixtures.deletable
      : operation.path.endsWith("/finish")
        ? fixtures.finishable
        : {}),
    ...fixtures.spareAt[`${operation.method} ${operation.path}`]
  }
  const poolOf = (name: string) => spares[name] ?? fixtures.pools[name] ?? []
  const real = (name: string) => {
    const pool = poolOf(name)
    return pool.length > 0 ? fc.constantFrom(...pool).map(encode) : uuidLike
  }
  const anySegment = (name: string) =>
    fc.oneof(
      { weight: 10, arbitrary: real(name) },
      { weight: 2, arbitrary: uuidLike },
      { weight: 4, arbitrary: junkString.map(encode) },
      { weight: 1, arbitrary: fc.constantFrom(...RAW_SEGMENTS) }
    )
  // Mostly every path parameter names a real fixture; else each is anything.
  const segments = (pick: (name: string) => fc.Arbitrary<string>) =>
    fc.tuple(...pathParams.map((p) => pick(p.name).map((v) => [p.name, v] as const)))
  const path = fc
    .oneof({ weight: 7, arbitrary: segments(real) }, { weight: 3, arbitrary: segments(anySegment) })
    .map((pairs) => {
      let url = operation.path
      for (const [name, value] of pairs) url = url.replace(`{${name}}`, value)
      return url
    })

  const queryValue = (p: Parameter): fc.Arbitrary<ReadonlyArray<string>> => {
    const schema = resolve(b, p.schema ?? {})
    const one = (s: Schema): fc.Arbitrary<string> => {
      const numeric = typeof s.pattern === "string" && s.pattern.includes("\\d")
      const validValue: fc.Arbitrary<string> = numeric
        ? fc.oneof(fc.integer({ min: 0, max: 3000 }).map(String), fc.constantFrom("1", "10", "100"))
        : Array.isArray(s.enum)
          ? fc.constantFrom(...(s.enum as Array<string>))
          : validString(fixtures, p.name, s)
      // Datetime parameters (`created_after`) get mostly datetimes that storage cannot hold.
      const nasty: fc.Arbitrary<string> = fc.oneof(
        { weight: 2, arbitrary: junkString },
        { weight: isDatetimeName(p.name) ? 6 : 1, arbitrary: junkDatetime },
        {
          weight: numeric ? 4 : 1,
          arbitrary: fc.constantFrom(
            ...NUMBERS.map((n) => (n instanceof Raw ? n.text : String(n))),
            "NaN",
            "Infinity",
            "1e3",
            "0x10",
            " 1",
            ""
          )
        }
      )
      return fc.oneof(
        { weight: 12, arbitrary: validValue.map(encode) },
        { weight: 7, arbitrary: nasty.map(encode) },
        { weight: 1, arbitrary: fc.constantFrom(...RAW_SEGMENTS) }
      )
    }
    return schema.type === "array"
      ? fc.array(one(resolve(b, schema.items ?? {})), { minLength: 1, maxLength: 3 })
      : fc.oneof(
          { weight: 9, arbitrary: one(schema).map((v) => [v]) },
          { weight: 1, arbitrary: fc.array(one(schema), { minLength: 2, maxLength: 2 }) }
        )
  }
  const query = fc
    .tuple(
      fc.oneof(
        { weight: 9, arbitrary: fc.constant<ReadonlyArray<string>>([]) },
        { weight: 1, arbitrary: fc.tuple(junkString, junkString).map(([k, v]) => [`${encode(k)}=${encode(v)}`]) }
      ),
      ...queryParams.map((p) =>
        fc
          .oneof(
            { weight: p.required === true ? 19 : 4, arbitrary: queryValue(p) },
            { weight: p.required === true ? 1 : 6, arbitrary: fc.constant<ReadonlyArray<string>>([]) }
          )
          .map((values) => values.map((v) => `${encode(p.name)}=${v}`))
      )
    )
    .map((parts) => parts.flat().join("&"))

  const none = fc.constant<Body>({ _tag: "none" })
  const schema = operation.body
  const body: fc.Arbitrary<Body> =
    operation.method === "GET"
      ? none
      : schema === undefined
        ? fc.oneof({ weight: 9, arbitrary: none }, { weight: 1, arbitrary: junkBody(freeForm) })
        : fc.oneof(
            ...builders.map((builder) => ({
              weight: 6,
              arbitrary: valid(builder, "body", schema, 0).map((value): Body => ({ _tag: "json", value }))
            })),
            { weight: 2, arbitrary: junkBody(valid(b, "body", schema, 0)) }
          )

  const auth = fc.oneof(
    { weight: 38, arbitrary: fc.constant("right" as const) },
    { weight: 1, arbitrary: fc.constant("none" as const) },
    { weight: 1, arbitrary: fc.constant("wrong" as const) }
  )
  const idempotencyKey = fc.oneof(
    { weight: 16, arbitrary: fc.constant<string | undefined>(undefined) },
    { weight: 3, arbitrary: fc.uuid() },
    { weight: 1, arbitrary: fc.constantFrom("", " ", "x".repeat(256), "é", "a b", "a\tb") }
  )

  return fc.record({ path, query, body, auth, idempotencyKey }).map(({ path, query, body, auth, idempotencyKey }) => {
    const headers: Record<string, string> = {}
    const right = operation.auth === "admin" ? ADMIN_TOKEN : fixtures.orgToken
    const wrong = operation.auth === "admin" ? fixtures.orgToken : ADMIN_TOKEN
    if (operation.auth !== "none" && auth !== "none")
      headers.authorization = `Bearer ${auth === "right" ? right : wrong}`
    if (idempotencyKey !== undefined && (operation.method === "POST" || operation.method === "PATCH")) {
      headers["idempotency-key"] = idempotencyKey
    }
    if (body._tag === "json" && body.contentType !== null)
      headers["content-type"] = body.contentType ?? "application/json"
    if (body._tag === "text" || body._tag === "bytes") headers["content-type"] = "application/json"
    return { operation, method: operation.method, url: query === "" ? path : `${path}?${query}`, headers, body }
  })
}

/** A request as sent: references resolved, body as text or bytes, and a short form of the body for reports. */
interface Sent {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | Uint8Array | undefined
  readonly summary: string
}

const sentOf = (request: FuzzRequest, current: Current): Sent => {
  const url = resolveRefs(request.url, current)
  const { body } = request
  switch (body._tag) {
    case "none":
      return { url, headers: request.headers, body: undefined, summary: "" }
    case "text":
      return { url, headers: request.headers, body: body.text, summary: body.label }
    case "bytes":
      return { url, headers: request.headers, body: body.bytes, summary: body.label }
    case "json": {
      const text = resolveRefs(write(body.value), current)
      const short = resolveRefs(summary(body.value), current)
      // Without a content type, as bytes (a string body would get text/plain from fetch).
      return {
        url,
        headers: request.headers,
        body: body.contentType === null ? Buffer.from(text) : text,
        summary: short
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Server causes: the app logs `Unhandled error in request` with the cause; this
// logger (replacing the default one for the app) files each entry under the
// request's `x-fuzz-id` header.

const serverLog = new Map<string, Array<string>>()

const CaptureLogger = Logger.layer([
  Logger.make((options) => {
    const request = Context.getOption(options.fiber.context, HttpServerRequest.HttpServerRequest)
    const id = request._tag === "Some" ? request.value.headers["x-fuzz-id"] : undefined
    const messages = Array.isArray(options.message) ? options.message : [options.message]
    const line = [
      options.logLevel,
      ...messages.map((m) => (typeof m === "string" ? m : Cause.isCause(m) ? Cause.pretty(m) : String(m))),
      ...(options.cause.reasons.length > 0 ? [Cause.pretty(options.cause)] : [])
    ].join(" ")
    if (id === undefined) {
      if (options.logLevel === "Error" || options.logLevel === "Fatal") process.stderr.write(`[fuzz app log] ${line}\n`)
      return
    }
    const lines = serverLog.get(id) ?? []
    lines.push(line)
    serverLog.set(id, lines)
  })
])

// ---------------------------------------------------------------------------
// Sending and judging

interface FuzzResponse {
  readonly status: number
  readonly text: string
}

interface Failure {
  readonly request: FuzzRequest
  readonly sent: Sent
  readonly response: FuzzResponse
  readonly problem: string
  readonly cause: string
}

const send = (baseUrl: string, method: string, sent: Sent, id: string) =>
  Effect.promise(async (): Promise<FuzzResponse> => {
    try {
      const response = await fetch(`${baseUrl}${sent.url}`, {
        method,
        headers: { ...sent.headers, "x-fuzz-id": id },
        ...(sent.body !== undefined ? { body: sent.body } : {}),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
      })
      return { status: response.status, text: await response.text() }
    } catch (error) {
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : ""
      return { status: 0, text: `${String(error)}${cause}` }
    }
  })

/** What is wrong with a response (D18, "Errors", W6), or undefined. */
const problemOf = (request: FuzzRequest, response: FuzzResponse): string | undefined => {
  if (response.status === 0) return "no response"
  if (response.status >= 500) return `${response.status}`
  if (response.status >= 400) {
    let parsed: unknown
    try {
      parsed = JSON.parse(response.text)
    } catch {}
    if (typeof parsed !== "object" || parsed === null || !("detail" in parsed))
      return `${response.status} without {detail}`
  }
  if (response.status >= 200 && response.status < 300 && request.body._tag === "json") {
    const { value } = request.body
    const webhookUrl = value instanceof Obj ? value.entries.find(([k]) => k === "webhook_url")?.[1] : undefined
    if (typeof webhookUrl === "string" && privateUrl.has(webhookUrl)) {
      return `${response.status}: private webhook URL accepted (W6)`
    }
  }
  return undefined
}

/**
 * A cause in one line, to tell causes apart: the innermost error message of the
 * logged cause and the first application frame (`Assistants/Files.ts:29`), with
 * ids and quoted values blanked.
 */
const causeSignature = (cause: string): string => {
  if (cause === "") return "(nothing logged)"
  const inner = [...cause.matchAll(/\[cause\]: (.*)/g)].map((m) => m[1]!)
  const message = inner.at(-1) ?? cause.split("\n")[0]!.replace(/^\w+ Unhandled error in request /, "")
  const site = /\/src\/([\w/]+\.ts):(\d+)/.exec(cause)
  return `${message.trim()}${site !== null ? ` @ ${site[1]}:${site[2]}` : ""}`
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/"[^"]*\d[^"]*"/g, '"…"')
    .slice(0, 200)
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** A curl command that repeats the request (tokens and the organization as variables; long or deep bodies abbreviated). */
const curlOf = (method: string, sent: Sent, fixtures: Fixtures): string => {
  const parts = [`curl -sS -X ${method} "$PARLEY${sent.url.replaceAll(fixtures.orgId, "$ORG_ID")}"`]
  for (const [name, value] of Object.entries(sent.headers)) {
    const shown = value.replace(ADMIN_TOKEN, "$ADMIN_TOKEN").replace(fixtures.orgToken, "$API_KEY")
    // Double quotes where the shell must expand $ADMIN_TOKEN or $API_KEY.
    parts.push(`-H ${shown === value ? shellQuote(`${name}: ${value}`) : `"${name}: ${shown}"`}`)
  }
  if (sent.body !== undefined) {
    parts.push(`--data-raw ${shellQuote(sent.summary.length > 600 ? `${sent.summary.slice(0, 600)}…` : sent.summary)}`)
  }
  return parts.join(" ")
}

/** The lines of a logged cause worth reading: the errors and the application's frames. */
const causeLines = (cause: string): string => {
  const lines = cause.split("\n").map((line) => line.trim())
  const frames = lines.filter((line) => line.includes("/src/")).slice(0, 2)
  const causes = lines.filter((line) => line.startsWith("[cause]")).slice(-2)
  return [lines[0] ?? "", ...frames, ...causes].join("\n          ") || "(nothing logged)"
}

const groupKey = (failure: Failure) =>
  `${failure.request.method} ${failure.request.operation.path} -> ${failure.problem} | ${causeSignature(failure.cause)}`

const report = (failures: ReadonlyArray<Failure>, fixtures: Fixtures): string => {
  const groups = new Map<string, Array<Failure>>()
  for (const failure of failures) groups.set(groupKey(failure), [...(groups.get(groupKey(failure)) ?? []), failure])
  const sections = [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, list]) => {
      const example = [...list].sort((a, b) => a.sent.summary.length - b.sent.summary.length)[0]!
      return [
        `### ${key} (${list.length}x)`,
        `  ${curlOf(example.request.method, example.sent, fixtures)}`,
        `  response: ${example.response.status} ${example.response.text.slice(0, 300)}`,
        `  server: ${causeLines(example.cause)}`
      ].join("\n")
    })
  return `${groups.size} distinct failures in ${failures.length} requests:\n${sections.join("\n")}`
}

// ---------------------------------------------------------------------------

/** Requests per chunk; the used-up fixtures are renewed before each. */
const CHUNK = 250

withApp({ allowPrivateNetworkTargets: false }, Layer.merge(ServicesLive, CaptureLogger))("fuzz", (it) => {
  it.effect(
    "no malformed request to any operation gets 5xx; every 4xx is a JSON {detail} (D18, Errors, W6)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const openapi = yield* api.request("GET", "/openapi.json")
        assert.strictEqual(openapi.status, 200)
        const operations = operationsOf(openapi.body)
        assert.isAtLeast(operations.length, EXPECTED_MIN_OPERATIONS, "operations in /openapi.json")
        const fixtures = yield* makeFixtures

        // Every operation in turn, those taking a body twice as often (they have more to get wrong); each
        // operation's requests come from its own seed derived from SEED, so a run is repeatable.
        const rotation = operations.flatMap((operation) =>
          operation.body !== undefined ? [operation, operation] : [operation]
        )
        const slots = Array.from({ length: RUNS }, (_, i) => rotation[i % rotation.length]!)
        const samples = new Map(
          operations.map((operation, i) => [
            operation,
            fc.sample(requestOf(openapi.body, fixtures, operation), {
              numRuns: slots.filter((slot) => slot === operation).length,
              seed: (SEED + i * 7919) | 0
            })
          ])
        )
        const requests = slots.map((operation) => samples.get(operation)!.shift()!)
        process.stderr.write(
          `[fuzz] seed ${SEED}, ${requests.length} requests over ${operations.length} operations (FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS} to repeat)\n`
        )

        const started = performance.now()
        const failures: Array<Failure> = []
        const statuses = new Map<string, number>()
        const perOperation = new Map<
          string,
          { requests: number; ok: number; statuses: Record<string, number>; examples: Record<string, Array<string>> }
        >()
        const record = (request: FuzzRequest, sent: Sent, id: string, response: FuzzResponse): void => {
          const klass = response.status === 0 ? "none" : `${Math.floor(response.status / 100)}xx`
          statuses.set(klass, (statuses.get(klass) ?? 0) + 1)
          const key = `${request.method} ${request.operation.path}`
          const counts = perOperation.get(key) ?? { requests: 0, ok: 0, statuses: {}, examples: {} }
          counts.requests += 1
          if (response.status >= 200 && response.status < 300) counts.ok += 1
          counts.statuses[response.status] = (counts.statuses[response.status] ?? 0) + 1
          // A few responses of each status, for the report: how far requests get.
          const examples = counts.examples[response.status] ?? []
          if (examples.length < 4) {
            examples.push(`${response.text.slice(0, 240)} <- ${sent.url.slice(0, 160)} ${sent.summary.slice(0, 240)}`)
          }
          counts.examples[response.status] = examples
          perOperation.set(key, counts)
          const problem = problemOf(request, response)
          if (problem !== undefined) {
            failures.push({ request, sent, response, problem, cause: (serverLog.get(id) ?? []).join("\n") })
          }
          serverLog.delete(id)
        }
        const chunks = Effect.gen(function* () {
          for (let start = 0; start < requests.length; start += CHUNK) {
            const current = yield* fixtures.renew
            yield* Effect.forEach(
              requests.slice(start, start + CHUNK),
              (request, offset) => {
                const id = String(start + offset)
                const sent = sentOf(request, current)
                return send(api.baseUrl, request.method, sent, id).pipe(
                  Effect.map((response) => record(request, sent, id, response))
                )
              },
              { concurrency: CONCURRENCY, discard: true }
            )
          }
        })
        yield* chunks.pipe(Effect.ensuring(fixtures.settle))
        const seconds = (performance.now() - started) / 1000
        const succeeded = [...perOperation.values()].filter((c) => c.ok > 0).length
        process.stderr.write(
          `[fuzz] ${requests.length} requests in ${seconds.toFixed(1)} s: ${[...statuses.entries()]
            .sort()
            .map(([k, n]) => `${k} ${n}`)
            .join(", ")}; operations responding 2xx at least once: ${succeeded}/${operations.length}\n`
        )
        if (process.env.FUZZ_REPORT !== undefined) {
          const entries = failures.map((f) => ({
            group: groupKey(f),
            method: f.request.method,
            url: f.sent.url,
            headers: f.sent.headers,
            body: f.sent.summary.slice(0, 2000),
            status: f.response.status,
            response: f.response.text.slice(0, 1000),
            cause: f.cause.slice(0, 4000)
          }))
          const content = {
            seed: SEED,
            runs: RUNS,
            seconds,
            perOperation: Object.fromEntries(perOperation),
            failures: entries
          }
          fs.writeFileSync(process.env.FUZZ_REPORT, JSON.stringify(content, null, 2))
        }

        // Every operation was fuzzed, and the fixtures and tokens let requests through.
        assert.strictEqual(perOperation.size, operations.length, "every operation was requested")
        assert.isAbove(statuses.get("2xx") ?? 0, requests.length / 100, "at least 1% of the requests succeeded")
        if (failures.length > 0) {
          const text = `[fuzz] seed ${SEED} (FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS} to repeat); ${report(failures, fixtures)}`
          assert.fail(text)
        }
      }),
    Math.max(180_000, RUNS * 60)
  )
})
