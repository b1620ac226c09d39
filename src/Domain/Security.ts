/**
 * The middleware of the contract: bearer authentication for the
 * organization APIs (an API key) and for the admin API (`ADMIN_TOKEN`), and the
 * API-wide translation of request decoding failures into the 422 validation
 * form (DECISIONS.md "Errors"). Implementations live in `src/Http.ts`.
 */
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { Unauthorized, ValidationFailed } from "./Errors.ts"
import type { CurrentOrganization } from "./Organization.ts"

/** `Authorization: Bearer <API key>`; provides the key's organization; 401 otherwise. */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { provides: CurrentOrganization }>()(
  "parley/Authorization",
  { security: { bearer: HttpApiSecurity.bearer }, error: Unauthorized.Wire }
) {}

/** `Authorization: Bearer $ADMIN_TOKEN` (O6); every admin request is 401 without `ADMIN_TOKEN`. */
export class AdminAuthorization extends HttpApiMiddleware.Service<AdminAuthorization>()("parley/AdminAuthorization", {
  security: { adminBearer: HttpApiSecurity.bearer },
  error: Unauthorized.Wire
}) {}

/** Request decoding failures of params, query and body become 422 `{detail: [{loc, msg, type}]}`. */
export class ValidationErrors extends HttpApiMiddleware.Service<ValidationErrors>()("parley/ValidationErrors", {
  error: ValidationFailed.Wire
}) {}
