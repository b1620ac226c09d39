/**
 * Ids: UUIDv7 strings made by the application (DECISIONS.md O2; strict
 * `Schema.UUID` checks accept them), from the `uuid` library, through the
 * {@link Ids} service: one generator per application, its state inside it.
 *
 * Speed tactic (measured by `npm run bench`, messages): the library's default
 * randomness asks `crypto.getRandomValues` for 16 bytes per id, a call that
 * took 4.6% of Parley's busy time on POST message (three ids per request:
 * message, event, request id). The library is given randomness from a 4 KiB
 * pool filled by `crypto.randomFillSync` (the same CSPRNG) instead, one fill
 * per 256 ids. Given randomness, the library no longer keeps ids of one
 * millisecond in order, so the monotonic counter it keeps by default (RFC 9562
 * method 1, as its own `updateV7State`) is kept here: ids of one generator
 * increase, so rows keyed by them sort in creation order.
 */
import * as crypto from "node:crypto"
import { Context, Layer } from "effect"
import { v7 } from "uuid"

const POOL_BYTES = 4096

/**
 * A new UUIDv7 generator (`0190a1b2-...-7...`): each call returns an id greater
 * than the last, time-ordered to the millisecond (`Date.now()`).
 */
export const makeIdGenerator = (): (() => string) => {
  const pool = new Uint8Array(POOL_BYTES)
  let offset = POOL_BYTES
  /** The last id's millisecond and its 31-bit counter (seeded at random each new millisecond). */
  let lastMsecs = Number.NEGATIVE_INFINITY
  let seq = 0
  return () => {
    // 16 random bytes from the pool (refilled when spent); `v7` copies them out before the next call.
    if (offset + 16 > POOL_BYTES) {
      crypto.randomFillSync(pool)
      offset = 0
    }
    const random = pool.subarray(offset, offset + 16)
    offset += 16
    const now = Date.now()
    if (now > lastMsecs) {
      seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!
      lastMsecs = now
    } else {
      seq = (seq + 1) | 0
      if (seq === 0) lastMsecs++
    }
    return v7({ random, msecs: lastMsecs, seq })
  }
}

/**
 * The application's id generator (O2): `newId()` returns a new UUIDv7,
 * greater than every id it returned before. Provided once per application
 * (`Server.ts`), so the ids of all its services share one order; a test layer
 * gets one of its own.
 */
export class Ids extends Context.Service<Ids, { readonly newId: () => string }>()("parley/Ids") {
  /** A generator of {@link makeIdGenerator}. */
  static readonly layer = Layer.sync(Ids, () => Ids.of({ newId: makeIdGenerator() }))
}
