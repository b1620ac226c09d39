/**
 * Sends JSON text built by PostgreSQL (`Domain/Common.ts` `JsonText`) as the
 * response body, with the endpoint's status.
 */
import { HttpServerResponse } from "effect/http"
import type { JsonText } from "./Common.ts"

/** A response with `body` as `application/json` and `status` (200 unless given). */
export const jsonText = <A>(body: JsonText<A>, status = 200): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(body, { status, contentType: "application/json" })
