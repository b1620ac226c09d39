/**
 * `parley/webhooks`: verifying and reading the requests Parley sends to an
 * app's `webhook_url` (DECISIONS.md W1-W4), for receivers written in
 * TypeScript. Imports no server code.
 *
 * ```ts
 * import { verifyWebhook } from "parley/webhooks"
 * // body: the raw request body as text (verify before parsing: the signature covers the bytes)
 * const event = verifyWebhook(process.env.PARLEY_SIGNING_SECRET!, request.headers, body)
 * if (event.type === "message.created") console.log(event.data.object.content)
 * ```
 *
 * With the app's `ordering: "conversation"` (W7) the events of one
 * conversation arrive one at a time in commit order, the next only after a 2xx
 * response to the previous one: process an event before responding 2xx, and use
 * {@link conversationOf} to keep per-conversation state.
 */
import { Schema } from "effect"
import { Webhook, WebhookVerificationError } from "standardwebhooks"
import { WebhookEvent } from "../Domain/Event.ts"

export { eventTypes } from "../Domain/EventType.ts"
export type { WebhookEvent }
export { WebhookVerificationError }

const decodeEvent = Schema.decodeUnknownSync(WebhookEvent)

/** Request headers as Node (`IncomingHttpHeaders`), fetch (`Headers`) or a plain record give them. */
export type WebhookHeaders = Headers | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** The three Standard Webhooks headers, lower-cased, from `headers` (a repeated header: its first value). */
const signatureHeadersOf = (headers: WebhookHeaders): Record<string, string> => {
  const get = (name: string): string =>
    headers instanceof Headers
      ? (headers.get(name) ?? "")
      : (() => {
          const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]
          return (Array.isArray(entry) ? entry[0] : (entry as string | undefined)) ?? ""
        })()
  return {
    "webhook-id": get("webhook-id"),
    "webhook-timestamp": get("webhook-timestamp"),
    "webhook-signature": get("webhook-signature")
  }
}

/**
 * Checks a webhook request and returns its event (W1, W3).
 *
 * - `secret`: the app's `signing_secret` (`whsec_<base64>`).
 * - `headers`: the request's headers; `webhook-id`, `webhook-timestamp` and
 *   `webhook-signature` are read (W4). Any of the signatures may match (during
 *   a secret rotation a request carries two).
 * - `body`: the raw body, as received (text or bytes), before any JSON parse.
 *
 * Throws `WebhookVerificationError` when a header is missing, the signature
 * does not match, or the timestamp is more than 5 minutes from now (a
 * replay); throws a `Schema` error (`SchemaError`) when the body is not an
 * event of W1 in the W3 envelope (a newer server's event type included:
 * update this package to read it). A `secret` that is not `whsec_<base64>` is
 * a configuration error: the `standardwebhooks` package throws a plain `Error`.
 */
export const verifyWebhook = (
  secret: string | ReadonlyArray<string>,
  headers: WebhookHeaders,
  body: string | Uint8Array
): WebhookEvent => {
  const payload = typeof body === "string" ? body : Buffer.from(body)
  const signed = signatureHeadersOf(headers)
  const secrets = typeof secret === "string" ? [secret] : secret
  let failure: unknown = new WebhookVerificationError("No signing secret given")
  for (const each of secrets) {
    try {
      return decodeEvent(new Webhook(each).verify(payload, signed))
    } catch (error) {
      // A wrong secret: try the next one. Anything else (a body that is no event) is final.
      if (!(error instanceof WebhookVerificationError)) throw error
      failure = error
    }
  }
  throw failure
}

/**
 * The id of the conversation an event is about (W7: the key its app's
 * `ordering: "conversation"` orders by): a conversation.created event's
 * conversation, and the `conversation_id` of a session or message event;
 * null for `contact.erased`, which is about a contact (D22),
 * `evaluation.completed`, about an assistant (A16), and `app.failing` and
 * `app.disabled`, about an app (W10): ordered after nothing.
 */
export const conversationOf = (event: WebhookEvent): string | null =>
  event.type === "contact.erased" ||
  event.type === "evaluation.completed" ||
  event.type === "app.failing" ||
  event.type === "app.disabled"
    ? null
    : event.type === "conversation.created"
      ? event.data.object.id
      : event.data.object.conversation_id
