/**
 * Message content types (conversations.md "Content types", DECISIONS.md D12).
 *
 * Clients may send `text`, `image`, `audio`, `video` and `file`. The AI runtime
 * also writes `function_call`, `function_result` and `thought`; a client sending
 * those, or any other type, gets 400 `Invalid content type` (D12). A known type
 * with bad fields gets 422.
 */
import { Effect, Schema, SchemaTransformation } from "effect"
import { isShallowJson } from "./Limits.ts"

const NonEmpty = Schema.String.pipe(Schema.check(Schema.isMinLength(1)))
const Url = NonEmpty.pipe(Schema.check(Schema.isMaxLength(4096)))

/** `{type: "text", text}` with a non-empty text. */
export const TextContent = Schema.Struct({ type: Schema.Literal("text"), text: NonEmpty })
/** `{type: "image", url}`. */
export const ImageContent = Schema.Struct({ type: Schema.Literal("image"), url: Url })
/** `{type: "audio", url, transcript?}`. */
export const AudioContent = Schema.Struct({
  type: Schema.Literal("audio"),
  url: Url,
  transcript: Schema.optionalKey(Schema.NullOr(Schema.String))
})
/** `{type: "video", url}`. */
export const VideoContent = Schema.Struct({ type: Schema.Literal("video"), url: Url })
/** `{type: "file", url, mime_type, name}`. */
export const FileContent = Schema.Struct({
  type: Schema.Literal("file"),
  url: Url,
  mime_type: NonEmpty,
  name: NonEmpty
})

/** Whether `value` is one user-perceived character (an extended grapheme cluster, UAX #29), or "" (D24). */
const isOneGraphemeOrEmpty = (value: string): boolean => {
  if (value === "") return true
  const segments = new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(value)[Symbol.iterator]()
  const first = segments.next()
  return !first.done && segments.next().done === true
}

/**
 * `{type: "reaction", emoji, message_id}` (D24): `emoji` one grapheme (at most
 * 64 UTF-16 units: flags and ZWJ sequences are one), or "" to remove the
 * role's reaction; `message_id` the message reacted to: a Parley id of the
 * same conversation (POST message; else 400 `Message not found`), or on
 * ingest also the channel's id of it.
 */
export const ReactionContent = Schema.Struct({
  type: Schema.Literal("reaction"),
  emoji: Schema.String.pipe(
    Schema.check(Schema.isMaxLength(64)),
    Schema.check(
      Schema.makeFilter((value: string) => isOneGraphemeOrEmpty(value) || "emoji must be one grapheme, or empty")
    )
  ),
  message_id: Url
})

/** The content schemas a client may send, by type (D12, D24). */
export const clientContentSchemas = {
  text: TextContent,
  image: ImageContent,
  audio: AudioContent,
  video: VideoContent,
  file: FileContent,
  reaction: ReactionContent
} as const

/** A content type a client may send. */
export type ClientContentType = keyof typeof clientContentSchemas

/** Whether `type` is a content type a client may send (D12); others are 400 `Invalid content type`. */
export const isClientContentType = (type: string): type is ClientContentType =>
  Object.hasOwn(clientContentSchemas, type)

const ContentObject = Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [
  Schema.Record(Schema.String, Schema.Unknown)
])

const decoders = Object.fromEntries(
  Object.entries(clientContentSchemas).map(([type, schema]) => [
    type,
    Schema.decodeUnknownEffect(schema as Schema.Codec<ContentInput>, { errors: "all" })
  ])
) as Record<ClientContentType, (input: unknown) => Effect.Effect<ContentInput, Schema.SchemaError>>

/**
 * Content as accepted at the edge of the API (D12): an object with a string
 * `type`, nested at most 32 levels (D18). A client type's fields are checked
 * as part of the request (422 with every problem of the request, `loc` under
 * the member), and its unknown members are dropped; any other `type` passes
 * through so the service can respond 400 `Invalid content type`
 * ({@link isClientContentType}).
 */
export const ContentInput = ContentObject.pipe(
  Schema.check(isShallowJson()),
  Schema.decodeTo(
    ContentObject,
    SchemaTransformation.transformEffect({
      decode: (content) =>
        isClientContentType(content.type)
          ? Effect.mapError(decoders[content.type](content), (error) => error.issue)
          : Effect.succeed(content),
      encode: Effect.succeed
    })
  )
).annotate({
  identifier: "ContentInput",
  description: "One of the content types: text, image, audio, video, file, reaction (D24)"
})
export type ContentInput = typeof ContentObject.Type

/** Content as stored and returned: any content object with a `type`. */
export const Content = Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [
  Schema.Record(Schema.String, Schema.Unknown)
]).annotate({ identifier: "Content" })
export type Content = typeof Content.Type

/**
 * The content of a redacted message (D23): `{"type":"redacted"}`, written by
 * the service only (a client sending it gets 400 `Invalid content type`, D12).
 */
export const redactedContent: Content = { type: "redacted" }

/** Whether `content` is a reaction (D24): stored as a message, summarized on its target, never triggers a reply. */
export const isReaction = (content: { readonly type: string }): boolean => content.type === "reaction"

/** The content types the AI runtime writes for a tool call and its result (R2): the payloads of a run. */
export const toolPayloadTypes: ReadonlyArray<string> = ["function_call", "function_result"]
