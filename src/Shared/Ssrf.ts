/**
 * The SSRF guard of every outgoing URL a client can name (DECISIONS.md W6):
 * webhook URLs (`Webhooks`: at app creation/PATCH and on every delivery
 * attempt) and assistant tool URLs (`Runtime/Tools.ts`: on every tool call).
 * Only `http:`/`https:` URLs without credentials, and only public unicast
 * addresses, checked on the address the host name resolves to (the connection
 * is made to the checked address through {@link guardedLookup}, so a DNS
 * answer that changes between check and connect cannot slip through).
 * `ALLOW_PRIVATE_NETWORK_TARGETS=true` lifts the address check (not the scheme
 * check). A shared mechanism (STYLE "Ownership"): it belongs to no domain.
 */

import type { LookupAddress, LookupAllOptions, LookupOptions } from "node:dns"
import * as dns from "node:dns"
import type * as http from "node:http"
import type * as net from "node:net"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Cause, Context, Effect, Layer, type Scope } from "effect"
import ipaddr from "ipaddr.js"
import { Agent as UndiciAgent } from "undici"
import { AppConfig } from "../Config.ts"

/** Why a URL or address is refused: a sentence for a 422 `msg` or an attempt's `error`. */
export class TargetRefused extends Error {
  override readonly name = "TargetRefused"
}

/** Global unicast IPv6 (RFC 4291 2000::/3): every public IPv6 address is in it. */
const IPV6_GLOBAL = ipaddr.parseCIDR("2000::/3")

/**
 * Whether `address` (an IPv4 or IPv6 literal) is a public unicast address.
 * IPv4: refused are loopback, private (10/8, 172.16/12, 192.168/16),
 * link-local (169.254/16 with the metadata address 169.254.169.254), CGNAT
 * (100.64/10), unspecified, broadcast, multicast, reserved and benchmarking.
 * IPv6: only global unicast (2000::/3) outside the special ranges, so every
 * form that embeds an IPv4 address is refused: IPv4-compatible (`::/96`,
 * `[::127.0.0.1]`), IPv4-mapped (`::ffff:0:0/96`), translated, NAT64, 6to4
 * and Teredo; also loopback, link-local, unique-local (fd00:ec2::254
 * included), documentation and multicast (W6).
 */
export const isPublicAddress = (address: string): boolean => {
  if (!ipaddr.isValid(address)) return false
  const parsed = ipaddr.parse(address)
  if (parsed.kind() === "ipv4") return parsed.range() === "unicast"
  return parsed.match(IPV6_GLOBAL) && parsed.range() === "unicast"
}

/** Strips the brackets of an IPv6 URL host (`[::1]` -> `::1`). */
const bareHost = (hostname: string) =>
  hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname

/**
 * Parses a target URL (webhook or tool): must be an absolute `http:` or
 * `https:` URL without credentials (W6). Throws {@link TargetRefused}.
 */
const parseTargetUrl = (text: string): URL => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new TargetRefused("URL must be an absolute http or https URL")
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TargetRefused("URL must be an absolute http or https URL")
  }
  if (url.username !== "" || url.password !== "") throw new TargetRefused("URL must not contain credentials")
  return url
}

const refusedAddress = (address: string) =>
  new TargetRefused(`Address ${address} is not a public address (private, loopback, link-local or reserved)`)

/**
 * Resolves a host name to every address it has (IPv4 or IPv6 literals), as
 * `dns.lookup` with `all` does; rejects when the name does not resolve.
 */
export type ResolveHost = (hostname: string) => Promise<ReadonlyArray<string>>

/** The system's resolver (`dns.lookup`, as Node's connections resolve). */
const systemResolveHost: ResolveHost = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map(({ address }) => address)

/**
 * The resolver of the W6 check at app creation/PATCH ({@link checkTargetUrl}):
 * the system's unless a layer provides another, so fast tests check host names
 * with no real DNS. Connections resolve through {@link guardedLookup}.
 */
export const HostResolver = Context.Reference<ResolveHost>("parley/Shared/HostResolver", {
  defaultValue: () => systemResolveHost
})

/**
 * Resolves `hostname` with `resolve` (every address) and refuses it when any
 * address is not public; an IP literal is checked as it is. Rejects with
 * {@link TargetRefused} (also when the name does not resolve).
 */
const checkHost = async (hostname: string, resolve: ResolveHost): Promise<void> => {
  const host = bareHost(hostname)
  if (ipaddr.isValid(host)) {
    if (!isPublicAddress(host)) throw refusedAddress(host)
    return
  }
  let addresses: ReadonlyArray<string>
  try {
    addresses = await resolve(host)
  } catch {
    throw new TargetRefused(`Host ${host} could not be resolved`)
  }
  if (addresses.length === 0) throw new TargetRefused(`Host ${host} could not be resolved`)
  for (const address of addresses) if (!isPublicAddress(address)) throw refusedAddress(address)
}

/**
 * Checks a webhook URL for app creation/PATCH (W6): scheme, then (unless
 * `allowPrivate`) the addresses `resolve` gives for its host (the system's
 * resolver by default). Rejects with {@link TargetRefused}.
 */
export const checkTargetUrl = async (
  text: string,
  allowPrivate: boolean,
  resolve: ResolveHost = systemResolveHost
): Promise<URL> => {
  const url = parseTargetUrl(text)
  if (!allowPrivate) await checkHost(url.hostname, resolve)
  return url
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | Array<LookupAddress>,
  family?: number
) => void

/**
 * A `lookup` for `net.connect` (Node's agents, the {@link guardedDispatcher}) that resolves like `dns.lookup` and
 * fails the connection with {@link TargetRefused} when any resolved address is
 * not public (W6, at attempt time; DNS rebinding safe since the socket connects
 * to the address checked here). IP-literal hosts never reach `lookup`: check
 * them with {@link refuseLiteralHost} before the request.
 */
const guardedLookup: net.LookupFunction = ((
  hostname: string,
  options: LookupOptions | LookupAllOptions,
  callback: LookupCallback
) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, "")
    for (const { address } of addresses) {
      if (!isPublicAddress(address)) return callback(refusedAddress(address) as NodeJS.ErrnoException, "")
    }
    if (options.all) return callback(null, addresses)
    const first = addresses[0]
    if (first === undefined) return callback(new Error(`No address for ${hostname}`) as NodeJS.ErrnoException, "")
    callback(null, first.address, first.family)
  })
}) as unknown as net.LookupFunction

/**
 * The W6 check for a URL whose host is an IP literal (such hosts never reach
 * {@link guardedLookup}): the refusal when the address is not public, else
 * undefined (also for a host name, which the lookup checks).
 */
const refuseLiteralHost = (url: URL): TargetRefused | undefined => {
  const host = bareHost(url.hostname)
  return /^[\d.]+$|:/.test(host) && !isPublicAddress(host) ? refusedAddress(host) : undefined
}

/**
 * The URL an outgoing request may go to (W6): `text` parsed as an http(s) URL
 * without credentials, its host refused when it is a non-public IP literal
 * (unless `allowPrivate`); host names are checked by {@link guardedLookup} when
 * the connection is made. Fails with {@link TargetRefused}.
 */
export const guardedTarget = (text: string, allowPrivate: boolean): Effect.Effect<URL, TargetRefused> =>
  Effect.suspend(() => {
    let url: URL
    try {
      url = parseTargetUrl(text)
    } catch (error) {
      return Effect.fail(error as TargetRefused)
    }
    const refused = allowPrivate ? undefined : refuseLiteralHost(url)
    return refused === undefined ? Effect.succeed(url) : Effect.fail(refused)
  })

/**
 * The options of Node's agents for outgoing requests to URLs clients name
 * (W6): keep-alive, and the {@link guardedLookup} unless `allowPrivate`
 * (`ALLOW_PRIVATE_NETWORK_TARGETS`).
 */
const guardedAgentOptions = (allowPrivate: boolean): http.AgentOptions => ({
  keepAlive: true,
  ...(allowPrivate ? {} : { lookup: guardedLookup })
})

/**
 * An `undici` dispatcher for outgoing requests to URLs clients name (W6), for
 * the scope: keep-alive connections per origin, HTTP/1.1 only, and every
 * connection (plain or TLS) resolved through the {@link guardedLookup} unless
 * `allowPrivate` (`ALLOW_PRIVATE_NETWORK_TARGETS`); destroyed (its connections
 * closed) when the scope closes. IP-literal hosts never reach the lookup:
 * check the URL with {@link guardedTarget} first.
 */
export const guardedDispatcher = (allowPrivate: boolean): Effect.Effect<UndiciAgent, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(
      () => new UndiciAgent({ allowH2: false, ...(allowPrivate ? {} : { connect: { lookup: guardedLookup } }) })
    ),
    (dispatcher) => Effect.promise(() => dispatcher.destroy())
  )

/**
 * Node's HTTP client for outgoing requests to URLs clients name: keep-alive,
 * and the W6 {@link guardedLookup} unless `ALLOW_PRIVATE_NETWORK_TARGETS`.
 * Requires `AppConfig`.
 */
export const guardedHttpClient = () =>
  Layer.unwrap(
    Effect.map(AppConfig, (config: typeof AppConfig.Service) =>
      NodeHttpClient.layerNodeHttpOptions(guardedAgentOptions(config.allowPrivateNetworkTargets))
    )
  )

/**
 * One line describing why an outgoing request failed, as delivery attempts
 * and tool results record it: `Timed out after N ms`, `Refused: <why>` (W6),
 * `ECONNREFUSED: <message>`, else the innermost error's message.
 */
export const describeOutboundFailure = (error: unknown, timeoutMs: number): string => {
  if (Cause.isTimeoutError(error)) return `Timed out after ${timeoutMs} ms`
  const reason = (error as { readonly reason?: { readonly cause?: unknown; readonly message?: string } } | null)?.reason
  let cause: unknown = reason?.cause ?? error
  for (let depth = 0; depth < 8 && cause instanceof Error && !(cause instanceof TargetRefused); depth++) {
    if (!(cause.cause instanceof Error)) break
    cause = cause.cause
  }
  if (cause instanceof TargetRefused) return `Refused: ${cause.message}`
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code
    return code === undefined ? cause.message : `${code}: ${cause.message}`
  }
  return reason?.message ?? String(error)
}
