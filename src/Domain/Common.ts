/**
 * Small schemas shared by every domain: identifiers, metadata objects and
 * timestamps as they travel on the wire (DECISIONS.md D17).
 */
import { Schema } from "effect"

/** Maximum length of ids and identifiers, in characters (D17). */
export const MAX_IDENTIFIER_LENGTH = 255

/** Maximum size of a `metadata` object serialized as JSON, in bytes (D17: 16 KiB). */
export const MAX_METADATA_BYTES = 16 * 1024

/** A client-supplied identifier or id: a string of 1 to 255 characters (D17). */
export const Identifier = Schema.String.pipe(
  Schema.check(Schema.isBetweenLength(1, MAX_IDENTIFIER_LENGTH))
)

/** A free text of at most 255 characters (names, ids of external systems; D17). */
export const ShortText = Schema.String.pipe(Schema.check(Schema.isMaxLength(MAX_IDENTIFIER_LENGTH)))

/** A JSON object of arbitrary key-value data. */
export const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
export type JsonObject = typeof JsonObject.Type

const metadataSize = Schema.makeFilter<JsonObject>(
  (value) =>
    Buffer.byteLength(JSON.stringify(value), "utf8") <= MAX_METADATA_BYTES ||
    `Metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON`,
  { expected: "an object of at most 16 KiB as JSON" }
)

/** A `metadata` object, at most 16 KiB as JSON (D17). */
export const Metadata = JsonObject.pipe(Schema.check(metadataSize))

/**
 * A moment as sent on the wire: ISO 8601 in UTC with milliseconds
 * (`2026-11-22T08:02:07.123Z`). Timestamps are produced by Parley, never parsed
 * from this form, so the domain type stays a string and costs nothing to encode.
 */
export const Timestamp = Schema.String.annotate({ format: "date-time" })

/** An ISO 8601 moment sent by a client (with a time zone or `Z`), decoded to a `Date`. */
export const DateTimeInput = Schema.String.pipe(
  Schema.check(
    Schema.makeFilter<string>(
      (text) =>
        (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(text) &&
          !Number.isNaN(Date.parse(text))) ||
        "Input should be a valid ISO 8601 datetime with a time zone",
      { expected: "an ISO 8601 datetime" }
    )
  )
)

/** Pagination offset: an integer >= 0. */
export const Offset = Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(0)))

/** A page size between 1 and `max`. */
export const Limit = (max: number) =>
  Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(1), Schema.isLessThanOrEqualTo(max)))

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether `id` has the form of a UUID (ids Parley generates are UUIDv7). */
export const isUuid = (id: string): boolean => UUID_PATTERN.test(id)

/**
 * JSON text of a value of type `A`, built by PostgreSQL (`Database/Json.ts`)
 * and sent as it is. The brand keeps texts of different shapes apart.
 */
export type JsonText<A> = string & { readonly __jsonOf?: A }
