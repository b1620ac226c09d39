/**
 * The middleware of the contract: bearer authentication for the
 * organization APIs (an API key) and for the admin API (`ADMIN_TOKEN`), and the
 * API-wide translation of request decoding failures into the 422 validation
 * form (DECISIONS.md "Errors"). Implementations live in `src/Http.ts`.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { Unauthorized, ValidationFailed } from "./Errors.ts"
import type { CurrentOrganization } from "./Organization.ts"

/**
 * An HTTP bearer scheme as OpenAPI documents it: `scheme: "bearer"` in lower
 * case (reference pages such as Scalar offer a token field for it, and Basic
 * auth for `Bearer`); the server reads the scheme name in any case.
 */
const bearerScheme = (description: string, format: string) =>
  HttpApiSecurity.http({ scheme: "bearer" }).pipe(
    HttpApiSecurity.annotateMerge(OpenApi.annotations({ description, format }))
  )

/** `Authorization: Bearer <API key>`; provides the key's organization; 401 otherwise. */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { provides: CurrentOrganization }>()(
  "parley/Authorization",
  {
    security: {
      apiKey: bearerScheme(
        "An organization's API key (`prl_...`, made with the admin API or `parley bootstrap`), for the conversations and assistants APIs.",
        "prl_<43 base64url characters>"
      )
    },
    error: Unauthorized.Wire
  }
) {}

/** `Authorization: Bearer $ADMIN_TOKEN` (O6); every admin request is 401 without `ADMIN_TOKEN`. */
export class AdminAuthorization extends HttpApiMiddleware.Service<AdminAuthorization>()("parley/AdminAuthorization", {
  security: {
    adminToken: bearerScheme(
      "The server's `ADMIN_TOKEN`, for the admin API; every admin request gets 401 when the server has none.",
      "ADMIN_TOKEN"
    )
  },
  error: Unauthorized.Wire
}) {}

/** Request decoding failures of params, query and body become 422 `{detail: [{loc, msg, type}]}`. */
export class ValidationErrors extends HttpApiMiddleware.Service<ValidationErrors>()("parley/ValidationErrors", {
  error: ValidationFailed.Wire
}) {}
