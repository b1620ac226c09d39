/**
 * Message content types (conversations.md "Content types", DECISIONS.md D12).
 *
 * Clients may send `text`, `image`, `audio`, `video` and `file`. The AI runtime
 * also writes `function_call`, `function_result` and `thought`; a client sending
 * those, or any other type, gets 400 `Invalid content type` (D12). A known type
 * with bad fields gets 422.
 */
import { Schema } from "effect"

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

/** The content schemas a client may send, by type (D12). */
export const clientContentSchemas = {
  text: TextContent,
  image: ImageContent,
  audio: AudioContent,
  video: VideoContent,
  file: FileContent
} as const

/** A content type a client may send. */
export type ClientContentType = keyof typeof clientContentSchemas

/** Content types written only by the AI runtime (D12). */
export const internalContentTypes = ["function_call", "function_result", "thought"] as const

/**
 * Content as accepted at the edge of the API: an object with a string `type`
 * and further members checked per type by the service (D12), so that an unknown
 * type can be answered 400 rather than 422.
 */
export const ContentInput = Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [
  Schema.Record(Schema.String, Schema.Unknown)
]).annotate({ identifier: "ContentInput", description: "One of the content types: text, image, audio, video, file" })
export type ContentInput = typeof ContentInput.Type

/** Content as stored and returned: any content object with a `type`. */
export const Content = Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [
  Schema.Record(Schema.String, Schema.Unknown)
]).annotate({ identifier: "Content" })
export type Content = typeof Content.Type
