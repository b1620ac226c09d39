/**
 * Small schemas shared by every domain: identifiers, metadata objects and
 * timestamps as they travel on the wire (DECISIONS.md D17).
 */
import { Schema, SchemaTransformation } from "effect"
import { isShallowJson, MAX_JSON_DEPTH, nestsDeeperThan, readDateTime } from "./Limits.ts"

/** Maximum length of ids and identifiers, in characters (D17). */
const MAX_IDENTIFIER_LENGTH = 255

/** Maximum size of a `metadata` object serialized as JSON, in bytes (D17: 16 KiB). */
export const MAX_METADATA_BYTES = 16 * 1024

/** A client-supplied identifier or id: a string of 1 to 255 characters (D17). */
export const Identifier = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, MAX_IDENTIFIER_LENGTH)))

/** A free text of at most 255 characters (names, ids of external systems; D17). */
export const ShortText = Schema.String.pipe(Schema.check(Schema.isMaxLength(MAX_IDENTIFIER_LENGTH)))

/**
 * An id Parley generates (a UUIDv7, lowercase), as returned: `format: uuid`
 * in the OpenAPI document. A plain string to the decoder (no check): ids in
 * paths are looked up as given, and one that is not a UUID is simply not
 * found (D1).
 */
export const Uuid = Schema.String.annotate({ format: "uuid" })

/** A JSON object of arbitrary key-value data, as stored and returned. */
export const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
export type JsonObject = typeof JsonObject.Type

/**
 * A free-form JSON object sent by a client (config, context, parameters,
 * merge patches): nested at most 32 levels (D18, `too_deep`).
 */
export const JsonObjectInput = JsonObject.pipe(Schema.check(isShallowJson()))

/** Any free-form JSON value sent by a client (`default_value`): nested at most 32 levels (D18). */
export const JsonValueInput = Schema.Unknown.pipe(Schema.check(isShallowJson()))

const metadataSize = Schema.makeFilter<JsonObject>(
  (value) =>
    // The size is measured only on shallow input: JSON.stringify recurses (the depth check reports the rest).
    nestsDeeperThan(value, MAX_JSON_DEPTH) ||
    Buffer.byteLength(JSON.stringify(value), "utf8") <= MAX_METADATA_BYTES ||
    `Metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON`,
  { expected: "an object of at most 16 KiB as JSON" }
)

/** A `metadata` object sent by a client: nested at most 32 levels (D18), at most 16 KiB as JSON (D17). */
export const Metadata = JsonObject.pipe(Schema.check(isShallowJson(), metadataSize))

/**
 * A moment as sent on the wire: ISO 8601 in UTC with microseconds
 * (`2026-11-22T08:02:07.123456Z`). Timestamps are produced by Parley, never
 * parsed from this form, so the domain type stays a string and costs nothing to
 * encode.
 */
export const Timestamp = Schema.String.annotate({ format: "date-time" })

/** The canonical form of a datetime the client sent (see {@link DateTimeInput}). */
const canonicalDateTime = (text: string): string => {
  const read = readDateTime(text)
  if (!read.ok) return text
  const fraction = /\.(\d+)/.exec(text.slice(text.indexOf(":")))?.[1] ?? ""
  return `${new Date(read.millis).toISOString().slice(0, 23)}${fraction.slice(3, 6).padEnd(3, "0")}Z`
}

/**
 * An ISO 8601 moment sent by a client, with a time zone or `Z`
 * (`2026-11-22T09:02:07.5+01:00`): a real calendar moment between years 1 and
 * 9999 in UTC (D18: `datetime_parsing`, `out_of_range`). Decoded to its
 * canonical UTC text with microseconds (`2026-11-22T08:02:07.500000Z`), which
 * PostgreSQL and `new Date` read alike.
 */
export const DateTimeInput = Schema.String.annotate({ format: "date-time" })
  .pipe(
    Schema.check(
      Schema.makeFilter<string>(
        (text) => {
          const read = readDateTime(text)
          return read.ok || read.type !== "datetime_parsing" || read.msg
        },
        { expected: "an ISO 8601 datetime with a time zone", issueType: "datetime_parsing" }
      ),
      Schema.makeFilter<string>(
        (text) => {
          const read = readDateTime(text)
          return read.ok || read.type !== "out_of_range" || read.msg
        },
        { expected: "a datetime between years 1 and 9999", issueType: "out_of_range" }
      )
    ),
    Schema.decodeTo(
      Schema.String,
      SchemaTransformation.transform({ decode: canonicalDateTime, encode: (text) => text })
    )
  )
  .annotate({ format: "date-time" })

/**
 * No body at all, the alternative of an operation whose body is optional
 * (transfer, finish, reply, publish): `payload: [Body, NoBody]`. Only
 * `undefined` passes, which is what HttpApi decodes an empty body to when no
 * payload schema's JSON form is `null`; a JSON `null` body is then refused
 * like every other body that is not an object, 422 `dict_type` at `["body"]`
 * (issue 37 item 3; DECISIONS.md "Errors"). Not `Schema.Null` nor
 * `Schema.Undefined`: HttpApi decodes the JSON codec of the payload, in which
 * both accept `null`, and then also reads an empty body as `null`. The OpenAPI
 * document shows such a body as optional (`OpenApi.ts`).
 */
export const NoBody = Schema.declare((input: unknown): input is undefined => input === undefined, {
  description: "No body: the request may be sent without one.",
  // Its own JSON form: without this the JSON codec would replace it by one that takes any JSON value.
  toCodecJson: () => undefined
})

/** Pagination offset: an integer >= 0. */
export const Offset = Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(0)))

/** A page size between 1 and `max`. */
export const Limit = (max: number) =>
  Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(1), Schema.isLessThanOrEqualTo(max)))

/** The items of a page of a list paged by id when the query gives no `limit` (issue 39 item 6). */
export const DEFAULT_PAGE_LIMIT = 100

/**
 * Query of a list paged by id, oldest first (issue 39 item 6: organizations,
 * assistants; the keyset shape of the delivery list, O6): `limit` 1-1000
 * (default {@link DEFAULT_PAGE_LIMIT}), `after_id` the last id of the previous
 * page (ids are UUIDv7, so id order is creation order). An `after_id` that is
 * not a UUID gives an empty page.
 */
export const PageQuery = Schema.Struct({
  limit: Schema.optionalKey(
    Limit(1000).annotate({ description: `Most items on the page, 1-1000 (default ${DEFAULT_PAGE_LIMIT}).` })
  ),
  after_id: Schema.optionalKey(
    Identifier.annotate({ description: "The last id of the previous page; absent: the first page." })
  )
})
export type PageQuery = typeof PageQuery.Type

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether `id` has the form of a UUID (ids Parley generates are UUIDv7). */
export const isUuid = (id: string): boolean => UUID_PATTERN.test(id)

/**
 * JSON text of a value of type `A`, built by PostgreSQL (`Database/Json.ts`)
 * and sent as it is. The brand keeps texts of different shapes apart.
 */
export type JsonText<A> = string & { readonly __jsonOf?: A }
