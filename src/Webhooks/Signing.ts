/**
 * Webhook signing (DECISIONS.md W4), a thin wrapper over the `standardwebhooks`
 * package: secrets are `whsec_` + base64 of 32 random bytes, one per app;
 * every request carries `webhook-id` (the event id), `webhook-timestamp` (Unix
 * seconds of the attempt) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of
 * "id.timestamp.body">`).
 */
import * as crypto from "node:crypto"
import { Webhook } from "standardwebhooks"

/** A new signing secret: `whsec_` + base64 of 32 random bytes (W4). */
export const generateSecret = (): string => `whsec_${crypto.randomBytes(32).toString("base64")}`

/** How long an app's previous secret still signs after a rotation (W8): 24 hours. */
export const PREVIOUS_SECRET_HOURS = 24

/**
 * The Standard Webhooks headers of one attempt (W4): `webhook-id`,
 * `webhook-timestamp` (Unix seconds of `at`), `webhook-signature`: one
 * `v1,<signature>` per secret, space-separated, the current secret first, then
 * the previous one while it has not expired (W8; the specification allows
 * several signatures).
 */
export const signatureHeaders = (
  secrets: readonly [current: string, previous?: string | null],
  eventId: string,
  at: Date,
  body: string
) => ({
  "webhook-id": eventId,
  "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
  "webhook-signature": secrets
    .filter((secret): secret is string => typeof secret === "string")
    .map((secret) => new Webhook(secret).sign(eventId, at, body))
    .join(" ")
})
