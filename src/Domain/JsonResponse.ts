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

/**
 * An error response outside the handlers' encoded errors (DECISIONS.md
 * "Errors"): `{"detail": text}` with `status` and `headers`.
 */
export const detailResponse = (
  status: number,
  text: string,
  headers?: Record<string, string>
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.jsonUnsafe({ detail: text }, { status, ...(headers ? { headers } : {}) })

const encoder = new TextEncoder()

/**
 * A JSON array response streamed as `rows` arrive, `per` rows serialized at a
 * time and written before the next are pulled, so no page-sized array or string
 * is held (pieces stay under V8's 128 KiB large-object size too; both grew the
 * heap on long export walks: `npm run bench -- export`). The bytes are those of
 * `JSON.stringify` of all the rows.
 */
export const jsonArrayStream = <E>(rows: Stream.Stream<unknown, E>, per = 100): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(
    Stream.suspend(() => {
      let first = true
      return rows.pipe(
        Stream.rechunk(per),
        Stream.mapArray((piece) => {
          const json = JSON.stringify(piece)
          const text = first ? json.slice(0, -1) : `,${json.slice(1, -1)}`
          first = false
          return [encoder.encode(text)] as const
        }),
        Stream.concat(Stream.sync(() => encoder.encode(first ? "[]" : "]")))
      )
    }),
    { contentType: "application/json" }
  )
