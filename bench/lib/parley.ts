/**
 * A Parley server process for a benchmark, on a benchmark database, with an
 * admin token, and an organization with an API key.
 */
import { randomBytes } from "node:crypto"
import type { Cleanup } from "./cleanup.ts"
import { expectJson } from "./http.ts"
import { freePort, rootDirectory, type ServerProcess, startServer } from "./process.ts"

/** A started Parley with an organization and an API key of it. */
export interface BenchParley {
  readonly server: ServerProcess
  readonly adminToken: string
  readonly organizationId: string
  readonly token: string
  /** An admin API call (`/admin/v1` + path) expected to respond `expected`. */
  readonly admin: (expected: number, method: string, path: string, body?: unknown) => Promise<any>
  /** A call of the organization's API (path from the server's root) with its API key, expected to respond `expected`. */
  readonly api: (expected: number, method: string, path: string, body?: unknown) => Promise<any>
}

/**
 * `BENCH_SERVER_NODE_OPTIONS` as the `NODE_OPTIONS` of a Parley server started
 * by a benchmark (for example the V8 flags of `npm start`), leaving the
 * benchmark process and the baseline server as they are.
 */
export const serverNodeOptions = (): Record<string, string> =>
  process.env.BENCH_SERVER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVER_NODE_OPTIONS } : {}

/**
 * Starts `node src/main.ts` on `databaseUrl` (stopped by `cleanup`) with `env`
 * added, waits for /readyz, and creates an organization and an API key.
 * `BENCH_SERVER_NODE_OPTIONS` becomes the server's `NODE_OPTIONS` (for example
 * V8 heap limits), leaving the benchmark process as it is.
 */
export const startParley = async (
  databaseUrl: string,
  cleanup: Cleanup,
  env: Record<string, string> = {},
  nodeArgs: ReadonlyArray<string> = []
): Promise<BenchParley> => {
  const adminToken = randomBytes(24).toString("base64url")
  const port = await freePort()
  const server = await startServer({
    name: "parley",
    args: [...nodeArgs, "src/main.ts"],
    port,
    env: {
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      LOG_FORMAT: "json",
      ADMIN_TOKEN: adminToken,
      ...serverNodeOptions(),
      ...env
    },
    readyPath: "/readyz",
    cwd: rootDirectory
  })
  cleanup.add("parley", () => server.stop())
  const admin = (expected: number, method: string, path: string, body?: unknown) =>
    expectJson(expected, method, `${server.baseUrl}/admin/v1${path}`, { token: adminToken, body })
  const organization = await admin(201, "POST", "/organizations", { name: "bench" })
  const key = await admin(201, "POST", `/organizations/${organization.id}/api-keys`, { name: "bench" })
  const api = (expected: number, method: string, path: string, body?: unknown) =>
    expectJson(expected, method, `${server.baseUrl}${path}`, { token: key.token, body })
  return { server, adminToken, organizationId: organization.id, token: key.token, admin, api }
}

/**
 * A versioned assistant of one llm node `start` with `instructions`, published
 * on `main`, and an AI agent answering from it: `{assistantId, agentId}`.
 */
export const aiAgent = async (parley: BenchParley, instructions: string) => {
  const assistant = await parley.admin(201, "POST", `/organizations/${parley.organizationId}/assistants`, {
    name: "Bench bot",
    snapshot: {
      graph: {
        initial_node_id: "start",
        nodes: [{ id: "start", name: "Start", type: "llm", config: { instructions } }]
      }
    }
  })
  await parley.api(200, "POST", `/assistants/api/v2/assistants/${assistant.id}/branches/main/publish`, {
    message: "v1"
  })
  const agent = await parley.admin(201, "POST", `/organizations/${parley.organizationId}/agents`, {
    name: "Bot",
    type: "ai",
    assistant_id: assistant.id
  })
  return { assistantId: assistant.id as string, agentId: agent.id as string }
}
