/**
 * A database outage an operator can read (DECISIONS.md O9): a server process
 * reaches PostgreSQL through a TCP proxy the test cuts and restores. While the
 * database cannot be reached, API requests get 503
 * `{"detail":"Service unavailable"}` with `Retry-After: 1` and `/readyz` 503;
 * the log has one WARN when the outage starts and one INFO when it ends, not a
 * line per request or per worker retry; afterwards requests succeed again.
 */
import * as net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callJson, freePort, ownDatabase, startServer } from "../support/Processes.ts"

/** A TCP proxy to `target` that can be cut (listener closed, connections destroyed) and restored on the same port. */
const proxy = async (target: { host: string; port: number }) => {
  const port = await freePort()
  const sockets = new Set<net.Socket>()
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
        client.pipe(upstream).pipe(client)
        client.on("close", () => upstream.destroy())
        upstream.on("close", () => client.destroy())
      })
      server.listen(port, "127.0.0.1", resolve)
    })
  const cut = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy()
      server?.close(() => resolve())
    })
  await open()
  return { port, open, cut }
}

const databaseUrl = ownDatabase("parley_outage")

describe("database outage (O9)", () => {
  it.live(
    "503 with Retry-After while PostgreSQL is unreachable, one WARN and one INFO in the log, then service again",
    () =>
      Effect.promise(async () => {
        const real = new URL(databaseUrl())
        const gate = await proxy({ host: real.hostname, port: Number(real.port || 5432) })
        const viaProxy = new URL(databaseUrl())
        viaProxy.hostname = "127.0.0.1"
        viaProxy.port = String(gate.port)
        const server = await startServer({
          DATABASE_URL: viaProxy.toString(),
          ADMIN_TOKEN: "admin",
          LOG_FORMAT: "json",
          LOG_LEVEL: "info"
        })
        try {
          const org = await callJson(server.baseUrl, "POST", "/admin/v1/organizations", "admin", { name: "Outage" })
          const key = await callJson(
            server.baseUrl,
            "POST",
            `/admin/v1/organizations/${org.body.id}/api-keys`,
            "admin",
            {}
          )
          const create = () =>
            fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions`, {
              method: "POST",
              headers: { authorization: `Bearer ${key.body.token}`, "content-type": "application/json" },
              body: JSON.stringify({ contact_id: "+1555", contact_name: "Ada" })
            })
          assert.strictEqual((await create()).status, 201)

          await gate.cut()
          const during: Array<number> = []
          for (let i = 0; i < 20; i++) {
            const response = await create()
            during.push(response.status)
            if (response.status === 503) {
              assert.strictEqual(response.headers.get("retry-after"), "1")
              assert.deepStrictEqual(await response.json(), { detail: "Service unavailable" })
            } else await response.text()
            await new Promise((resolve) => setTimeout(resolve, 150))
          }
          assert.deepStrictEqual(new Set(during), new Set([503]), JSON.stringify(during))
          assert.strictEqual((await fetch(`${server.baseUrl}/readyz`)).status, 503)

          await gate.open()
          const deadline = Date.now() + 15_000
          let status = 0
          while (Date.now() < deadline) {
            status = (await create()).status
            if (status === 201) break
            await new Promise((resolve) => setTimeout(resolve, 200))
          }
          assert.strictEqual(status, 201, "requests succeed once the database is back")
          // The probe notices within about a second.
          await new Promise((resolve) => setTimeout(resolve, 2_000))
        } finally {
          server.child.kill("SIGTERM")
          await server.exited
          await gate.cut()
        }
        const entries = server
          .output()
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { level: string; message: unknown })
        const loud = entries.filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
        assert.strictEqual(loud.length, 1, JSON.stringify(loud, null, 1).slice(0, 3000))
        assert.match(String(loud[0]!.message), /^Database unreachable: .*requests answer 503/)
        const back = entries.filter((entry) => String(entry.message).startsWith("Database reachable again"))
        assert.strictEqual(back.length, 1, JSON.stringify(entries.map((entry) => entry.message)))
      }),
    120_000
  )
})
