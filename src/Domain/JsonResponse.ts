/**
 * Sends JSON text built by PostgreSQL (`Domain/Common.ts` `JsonText`) as the
 * response body, with the endpoint's status.
 */
import { Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import type { JsonText } from "./Common.ts"

/** A response with `body` as `application/json` and `status` (200 unless given). */
export const jsonText = <A>(body: JsonText<A>, status = 200): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(body, { status, contentType: "application/json" })

const encoder = new TextEncoder()

/**
 * A JSON array response streamed in pieces: `rows` serialized `per` at a time,
 * so no page-sized string is ever built (large strings live in V8's large-object
 * space until a full collection, which grows the heap on long export walks).
 */
export const jsonArrayStream = (rows: ReadonlyArray<unknown>, per = 100): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(
    Stream.fromIterable(
      (function* () {
        if (rows.length === 0) {
          yield encoder.encode("[]")
          return
        }
        for (let start = 0; start < rows.length; start += per) {
          const piece = JSON.stringify(rows.slice(start, start + per))
          yield encoder.encode(
            `${start === 0 ? "[" : ","}${piece.slice(1, -1)}${start + per >= rows.length ? "]" : ""}`
          )
        }
      })()
    ),
    { contentType: "application/json" }
  )
