/**
 * Ids: UUIDv7 strings made by the application (DECISIONS.md O2; strict
 * `Schema.UUID` checks accept them), from the `uuid` library.
 *
 * Speed tactic (measured by `npm run bench`, messages): the library's default
 * randomness asks `crypto.getRandomValues` for 16 bytes per id, a call that
 * took 4.6% of Parley's busy time on POST message (three ids per request:
 * message, event, request id). The library is given randomness from a 4 KiB
 * pool filled by `crypto.randomFillSync` (the same CSPRNG) instead, one fill
 * per 256 ids. Given randomness, the library no longer keeps ids of one
 * millisecond in order, so the monotonic counter it keeps by default (RFC 9562
 * method 1, as its own `updateV7State`) is kept here: ids of one process
 * increase, so rows keyed by them sort in creation order.
 */
import * as crypto from "node:crypto"
import { v7 } from "uuid"

const POOL_BYTES = 4096
const pool = new Uint8Array(POOL_BYTES)
let offset = POOL_BYTES

/** 16 random bytes from the pool (refilled when spent); `v7` copies them out before the next call. */
const pooledRandom = (): Uint8Array => {
  if (offset + 16 > POOL_BYTES) {
    crypto.randomFillSync(pool)
    offset = 0
  }
  const bytes = pool.subarray(offset, offset + 16)
  offset += 16
  return bytes
}

/** The last id's millisecond and its 31-bit counter (seeded at random each new millisecond). */
let lastMsecs = Number.NEGATIVE_INFINITY
let seq = 0

/** A new UUIDv7 (`0190a1b2-...-7...`), increasing within the process, time-ordered to the millisecond. */
export const newId = (): string => {
  const random = pooledRandom()
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
