/**
 * A TCP proxy in front of a database server, for the outage tests (DECISIONS.md
 * O9, issue 38 item 1). It can
 *
 * - `cut()`: close its listener and destroy every connection (a server that is
 *   down: connections are refused), and `open()` again on the same port;
 * - `stall()`: keep every connection open and keep forwarding what the client
 *   sends, but hold back everything the server sends (a server that does not
 *   respond: paused by SIGSTOP, a stuck failover, a full disk). New connections
 *   are accepted and their startup packets forwarded, so they hang too.
 *   Statements that reach the server still run and may commit: the client just
 *   never hears of it, the worst case for a request that times out.
 *   `release()` sends what was held back and forwards again.
 */
import * as net from "node:net"
import { freePort } from "../../src/Database/Embedded.ts"

/** A proxy listening on 127.0.0.1:`port` (see module docs). */
export interface TcpProxy {
  readonly port: number
  readonly open: () => Promise<void>
  readonly cut: () => Promise<void>
  readonly stall: () => void
  readonly release: () => void
}

/** Starts a proxy to `target` (see module docs); it is open. */
export const tcpProxy = async (target: { readonly host: string; readonly port: number }): Promise<TcpProxy> => {
  const port = await freePort()
  const sockets = new Set<net.Socket>()
  /** The server's bytes held back per client connection while stalled. */
  const held = new Map<net.Socket, Array<Buffer>>()
  let stalled = false
  let server: net.Server | undefined
  const open = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host)
        for (const socket of [client, upstream]) {
          sockets.add(socket)
          socket.on("close", () => sockets.delete(socket))
          socket.on("error", () => socket.destroy())
        }
        held.set(client, [])
        client.on("data", (chunk) => upstream.write(chunk))
        upstream.on("data", (chunk) => {
          if (stalled) held.get(client)?.push(chunk)
          else client.write(chunk)
        })
        client.on("close", () => {
          held.delete(client)
          upstream.destroy()
        })
        upstream.on("close", () => client.destroy())
      })
      server.listen(port, "127.0.0.1", resolve)
    })
  const cut = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy()
      if (server === undefined || !server.listening) return resolve()
      server.close(() => resolve())
    })
  const stall = () => {
    stalled = true
  }
  const release = () => {
    stalled = false
    for (const [client, chunks] of held) {
      for (const chunk of chunks.splice(0)) if (!client.destroyed) client.write(chunk)
    }
  }
  await open()
  return { port, open, cut, stall, release }
}

/**
 * A proxy in front of the server of the PostgreSQL URL `databaseUrl`, and
 * that URL pointed at the proxy (same credentials and database).
 */
export const proxiedDatabase = async (
  databaseUrl: string
): Promise<{ readonly gate: TcpProxy; readonly url: string }> => {
  const real = new URL(databaseUrl)
  const gate = await tcpProxy({ host: real.hostname, port: Number(real.port || 5432) })
  const viaProxy = new URL(databaseUrl)
  viaProxy.hostname = "127.0.0.1"
  viaProxy.port = String(gate.port)
  return { gate, url: viaProxy.toString() }
}
