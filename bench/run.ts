/**
 * `npm run bench [-- <benchmark>] [flags]`: runs one benchmark of bench/suites/.
 * Without a name (or with only flags) it runs `messages`.
 */
const benchmarks: Record<
  string,
  {
    readonly description: string
    readonly load: () => Promise<{ run: (args: ReadonlyArray<string>) => Promise<void> }>
  }
> = {
  messages: {
    description: "POST message: Parley vs the Fastify + postgres.js baseline (default)",
    load: () => import("./suites/messages.ts")
  },
  memory: {
    description: "Server RSS idle, under 50 connections of POST message, and for 45 s after the load",
    load: () => import("./suites/memory.ts")
  },
  webhooks: {
    description: "Webhook delivery: deliveries/s (10,000 events) and commit-to-receipt latency at 500 events/s",
    load: () => import("./suites/webhooks.ts")
  },
  encoding: {
    description: "One export page of 3,000 messages: schema encoding vs plain JSON vs PostgreSQL-built JSON",
    load: () => import("./suites/encoding.ts")
  },
  fairness: {
    description:
      "Rate limit fairness: an unlimited organization's POST message alone vs. while one limited to 20/s is hammered; CPU per 429",
    load: () => import("./suites/fairness.ts")
  },
  evaluations: {
    description:
      "Evaluations (A16) on an OpenAI-compatible test server: 1,000 turns alone (s, CPU per turn and side), live replies beside them",
    load: () => import("./suites/evaluations.ts")
  },
  export: {
    description: "Bulk export: walk 1,000,000 messages at limit 3000 against psql \\copy as the floor",
    load: () => import("./suites/export.ts")
  },
  lifecycle: {
    description:
      "Retention (D21): a sweep deleting 1,000,000 messages, rows/s, and another organization's POST message p99 meanwhile",
    load: () => import("./suites/lifecycle.ts")
  },
  ingest: {
    description: "POST /ingest: 1,000 distinct (to, from) pairs and one hot pair, Parley vs the baseline",
    load: () => import("./suites/ingest.ts")
  },
  replies: {
    description: "AI replies on the echo model: 1,000 sessions triggering a reply with debounce 0; replies/s, latency",
    load: () => import("./suites/replies.ts")
  },
  runstats: {
    description: "Run statistics (A14) over 1,000,000 runs of one assistant: GET /runs/stats median and max",
    load: () => import("./suites/runstats.ts")
  },
  tracing: {
    description:
      "Tracing overhead: POST message with tracing off and on (OTLP/HTTP to a local receiver); spans counted",
    load: () => import("./suites/tracing.ts")
  },
  versioning: {
    description: "Assistant version control with 2,000 nodes: changesets, publish, diff, merge",
    load: () => import("./suites/versioning.ts")
  }
}

const args = process.argv.slice(2)
const first = args[0]
if (first === "--help" || first === "-h" || first === "help") {
  process.stdout.write(
    `usage: npm run bench [-- <benchmark>] [--cpu-prof] [--cpu-prof-baseline]\n\n${Object.entries(benchmarks)
      .map(([name, { description }]) => `  ${name.padEnd(12)} ${description}`)
      .join("\n")}\n`
  )
} else {
  const name = first === undefined || first.startsWith("-") ? "messages" : first
  const benchmark = benchmarks[name]
  if (benchmark === undefined) {
    process.stderr.write(`Unknown benchmark "${name}"; known: ${Object.keys(benchmarks).join(", ")}\n`)
    process.exitCode = 2
  } else {
    const rest = name === first ? args.slice(1) : args
    try {
      await (await benchmark.load()).run(rest)
    } catch (error) {
      const describe = (value: unknown): string =>
        value instanceof Error
          ? `${value.stack ?? value.message}${value.cause !== undefined ? `\ncaused by: ${describe(value.cause)}` : ""}`
          : String(value)
      process.stderr.write(`[bench] ${name} failed: ${describe(error)}\n`)
      process.exitCode = 1
    }
  }
}
