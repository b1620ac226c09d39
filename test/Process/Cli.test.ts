/**
 * The `parley` CLI (DECISIONS.md O6) on the test database: organizations, API
 * keys (created, then revoked), agents; errors are reported, not thrown; usage
 * errors on stderr only, exit 2 (O9, issue 39 item 5).
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { CliOutput, Command, type HelpDoc } from "effect/cli"
import postgres from "postgres"
import { AppConfig } from "../../src/Config.ts"
import { parley } from "../../src/cli.ts"
import { ownDatabase, parseShow as parse, runNode, startServer } from "../support/Processes.ts"

const databaseUrl = ownDatabase("parley_cli")

/**
 * A test body with `cli` (`src/cli.ts` on this file's database, returning its
 * exit code and output) and `db` (a client of that database, closed after).
 */
const withCli = (
  body: (cli: (...args: Array<string>) => ReturnType<typeof runNode>, db: ReturnType<typeof postgres>) => Promise<void>
) =>
  Effect.promise(async () => {
    const env = { DATABASE_URL: databaseUrl() }
    const db = postgres(databaseUrl(), { max: 1 })
    try {
      await body((...args) => runNode("src/cli.ts", args, env), db)
    } finally {
      await db.end()
    }
  })

/** Every command path of `command` below `path` (`[]` is the root), depth first. */
const commandPaths = (command: Command.Command.Any, path: ReadonlyArray<string>): Array<ReadonlyArray<string>> => [
  path,
  ...command.subcommands.flatMap((group) => group.commands.flatMap((sub) => commandPaths(sub, [...path, sub.name])))
]

/** The help document `parley <path> --help` prints, captured in-process (no database is touched). */
const helpOf = (path: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const docs: Array<HelpDoc.HelpDoc> = []
    yield* Command.runWith(parley, { version: "test" })([...path, "--help"]).pipe(
      Effect.provideService(CliOutput.Presenter, {
        present: (event) => Effect.sync(() => event._tag === "Help" && docs.push(event.helpDoc))
      })
    )
    assert.strictEqual(docs.length, 1, path.join(" "))
    return docs[0]!
  })

/** A usage error's two lines on stderr (issue 39 item 5). */
const usage = (command: string, problems: string) =>
  `Error: ${command}: ${problems}\nRun "${command} --help" for usage.\n`

describe("parley CLI", () => {
  it.live(
    "issue 39 item 5 (O9): a usage error names every problem on stderr, with a did-you-mean, nothing on stdout, exit 2; --help is on stdout, exit 0",
    () =>
      Effect.promise(async () => {
        // No database is needed to refuse a command line, and none is reached.
        const cli = (...args: Array<string>) =>
          runNode("src/cli.ts", args, { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" })
        const [unknownFlag, unknownCommand, missingFlags, missingCommand, help] = await Promise.all([
          cli("bootstrap", "--nam", "Acme"),
          cli("rollot", "show"),
          cli("rollout", "start", "--org", "x"),
          cli("key"),
          cli("rollout", "start", "--help")
        ])
        // `eval "$(parley bootstrap --nam Acme)"` evaluates nothing.
        assert.deepStrictEqual(unknownFlag, {
          code: 2,
          stdout: "",
          stderr: usage("parley bootstrap", "unknown flag --nam (did you mean --name?)")
        })
        assert.deepStrictEqual(unknownCommand, {
          code: 2,
          stdout: "",
          stderr: usage("parley", 'unknown command "rollot" (did you mean rollout?)')
        })
        assert.deepStrictEqual(missingFlags, {
          code: 2,
          stdout: "",
          stderr: usage("parley rollout start", "missing --assistant, --branch, --percent")
        })
        assert.deepStrictEqual(missingCommand, {
          code: 2,
          stdout: "",
          stderr: usage("parley key", "missing a command: create, revoke, list")
        })
        assert.deepStrictEqual([help.code, help.stderr], [0, ""])
        assert.include(help.stdout, "USAGE\n  parley rollout start [flags]")
        assert.include(help.stdout, "--percent string")
      }),
    120_000
  )

  it.effect("issue 39 item 5: every flag of every command has a description in its --help", () =>
    Effect.gen(function* () {
      const paths = commandPaths(parley, [])
      // The walk reaches the leaves, not only the root.
      assert.deepInclude(paths, ["key", "create"])
      assert.deepInclude(paths, ["rollout", "start"])
      const undocumented: Array<string> = []
      for (const path of paths) {
        const doc = yield* helpOf(path)
        for (const flag of [...doc.flags, ...(doc.globalFlags ?? [])]) {
          if (Option.getOrElse(flag.description, () => "").trim() === "") {
            undocumented.push(`parley ${path.join(" ")} --${flag.name}`)
          }
        }
      }
      assert.deepStrictEqual(undocumented, [])
    }).pipe(Effect.provide([NodeServices.layer, AppConfig.layerWith({})]))
  )

  it.live(
    "issue 39 item 5: bootstrap prints only exports and comments, never says the admin API is off nor names a token of its own",
    () =>
      Effect.promise(async () => {
        const hint =
          "# Admin API (/admin/v1): Authorization: Bearer $ADMIN_TOKEN, the token the server was started with (docs/walkthroughs.md)"
        // The command cannot see the server's environment: with or without ADMIN_TOKEN of its own, one hint.
        for (const adminToken of [undefined, "walkthrough-admin-token-0123456789abcdef"]) {
          const bootstrap = await runNode("src/cli.ts", ["bootstrap", "--name", "Acme"], {
            DATABASE_URL: databaseUrl(),
            ADMIN_TOKEN: adminToken
          })
          assert.strictEqual(bootstrap.code, 0, bootstrap.stderr)
          const lines = bootstrap.stdout.trimEnd().split("\n")
          assert.match(lines[0]!, /^export PARLEY_ORG_ID='[^']+'$/)
          assert.match(lines[1]!, /^export PARLEY_TOKEN='prl_[^']+'$/)
          assert.deepStrictEqual(lines.slice(2), [
            "# The token is shown only once. Send it as: Authorization: Bearer $PARLEY_TOKEN",
            hint
          ])
        }
      }),
    120_000
  )

  it.live(
    "issue 16 (W8, W9): app rotate-secret prints the new secret and until when the previous one signs; app recover prints how many",
    () =>
      withCli(async (cli, db) => {
        const org = parse((await cli("org", "create", "--name", "Rotating")).stdout) as { id: string }
        const appId = crypto.randomUUID()
        await db`INSERT INTO apps (id, organization_id, name, webhook_url, events, enabled, signing_secret, created_at)
        VALUES (${appId}, ${org.id}, 'CRM', 'https://example.com/hook', '{session.created}', true, 'whsec_old', now())`
        const rotated = await cli("app", "rotate-secret", "--org", org.id, "--app", appId)
        assert.strictEqual(rotated.code, 0, rotated.stderr)
        const shown = parse(rotated.stdout)
        assert.match(shown.signing_secret!, /^whsec_/)
        assert.isAbove(Date.parse(shown.previous_secret_expires_at!), Date.now() + 23 * 3_600_000)
        const [row] = await db<Array<{ signing_secret: string; previous_signing_secret: string }>>`
        SELECT signing_secret, previous_signing_secret FROM apps WHERE id = ${appId}`
        assert.deepStrictEqual([row!.signing_secret, row!.previous_signing_secret], [shown.signing_secret, "whsec_old"])
        const missing = await cli("app", "rotate-secret", "--org", org.id, "--app", crypto.randomUUID())
        assert.deepStrictEqual([missing.code, missing.stderr.trim()], [1, "Error: App not found"])
        // W9: recover, its range checked as the admin API checks it.
        const recovered = await cli(
          "app",
          "recover",
          "--org",
          org.id,
          "--app",
          appId,
          "--since",
          "2026-01-01T00:00:00Z"
        )
        assert.deepStrictEqual([recovered.code, parse(recovered.stdout).deliveries], [0, "0"])
        const badRange = await cli("app", "recover", "--org", org.id, "--app", appId, "--since", "yesterday")
        assert.strictEqual(badRange.code, 1)
        assert.match(badRange.stderr.trim(), /^Error: since: /)
      }),
    120_000
  )

  it.live(
    "W10: app list prints each app without its secret and its health: ok, failing since, disabled for failing, disabled",
    () =>
      withCli(async (cli, db) => {
        const org = parse((await cli("org", "create", "--name", "Healthy")).stdout) as { id: string }
        const ids = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
        for (const [i, id] of ids.entries()) {
          await db`INSERT INTO apps (id, organization_id, name, webhook_url, events, enabled, signing_secret, created_at)
          VALUES (${id}, ${org.id}, ${`App ${i}`}, 'https://example.com/hook', '{session.created,app.disabled}', true,
            'whsec_secret', now() + ${i} * interval '1 second')`
        }
        await db`UPDATE apps SET failing_since = '2026-11-01T10:00:00Z' WHERE id = ${ids[1]!}`
        await db`UPDATE apps SET failing_since = '2026-11-01T10:00:00Z', enabled = false, disabled_reason = 'failing',
          disabled_at = '2026-11-06T10:00:00Z' WHERE id = ${ids[2]!}`
        await db`UPDATE apps SET enabled = false WHERE id = ${ids[3]!}`
        const listed = await cli("app", "list", "--org", org.id)
        assert.strictEqual(listed.code, 0, listed.stderr)
        assert.notInclude(listed.stdout, "whsec_")
        const apps = listed.stdout.trim().split("\n\n").map(parse)
        assert.deepStrictEqual(
          apps.map((app) => [app.id, app.health]),
          [
            [ids[0], "ok"],
            [ids[1], "failing since 2026-11-01T10:00:00.000000Z"],
            [ids[2], "disabled (failing since 2026-11-01T10:00:00.000000Z, disabled at 2026-11-06T10:00:00.000000Z)"],
            [ids[3], "disabled"]
          ]
        )
        assert.deepInclude(apps[2], {
          events: "session.created,app.disabled",
          enabled: "false",
          disabled_reason: "failing",
          disabled_at: "2026-11-06T10:00:00.000000Z"
        })
        const missing = await cli("app", "list", "--org", crypto.randomUUID())
        assert.deepStrictEqual([missing.code, missing.stderr.trim()], [1, "Error: Organization not found"])
      }),
    120_000
  )

  it.live(
    "issue 39 item 6: org list and show, key list (last 4 characters, never the token), agent list, show, update and delete, assistant list, show, update and delete (409 while an ai agent has it)",
    () =>
      withCli(async (cli, db) => {
        /** The records `showAll` prints, one block each. */
        const parseAll = (stdout: string) => (stdout.trim() === "" ? [] : stdout.trim().split("\n\n").map(parse))
        const org = parse((await cli("org", "create", "--name", "Findable")).stdout) as { id: string }
        const shownOrg = await cli("org", "show", "--org", org.id)
        assert.deepStrictEqual([shownOrg.code, parse(shownOrg.stdout)], [0, org])
        const orgs = await cli("org", "list", "--limit", "1000")
        assert.strictEqual(orgs.code, 0, orgs.stderr)
        assert.deepInclude(parseAll(orgs.stdout), org)
        const badLimit = await cli("org", "list", "--limit", "0")
        assert.strictEqual(badLimit.code, 1)
        assert.match(badLimit.stderr.trim(), /^Error: limit: /)
        // Keys: the token's last 4 characters, never the token.
        const key = parse((await cli("key", "create", "--org", org.id, "--name", "ci")).stdout)
        const keys = await cli("key", "list", "--org", org.id)
        assert.strictEqual(keys.code, 0, keys.stderr)
        assert.deepStrictEqual(
          parseAll(keys.stdout).map((each) => [each.id, each.name, each.token_last4]),
          [[key.id, "ci", key.token!.slice(-4)]]
        )
        assert.notInclude(keys.stdout, key.token!.slice(0, -4))
        // Assistants (made here through SQL: the CLI creates none).
        const assistant = crypto.randomUUID()
        await db`INSERT INTO assistants (id, organization_id, name, description, versioned, created_at)
          VALUES (${assistant}, ${org.id}, 'Bot', 'Helps', false, now())`
        const assistants = await cli("assistant", "list", "--org", org.id)
        assert.deepStrictEqual(
          parseAll(assistants.stdout).map((each) => [each.id, each.name, each.description]),
          [[assistant, "Bot", "Helps"]]
        )
        const renamed = await cli(
          "assistant",
          "update",
          "--org",
          org.id,
          "--assistant",
          assistant,
          "--name",
          "Bot 2",
          "--clear-description"
        )
        assert.strictEqual(renamed.code, 0, renamed.stderr)
        assert.deepStrictEqual([parse(renamed.stdout).name, parse(renamed.stdout).description], ["Bot 2", ""])
        assert.deepStrictEqual(
          parse((await cli("assistant", "show", "--org", org.id, "--assistant", assistant)).stdout),
          parse(renamed.stdout)
        )
        // Agents.
        const agent = parse(
          (await cli("agent", "create", "--org", org.id, "--name", "Bot", "--type", "ai", "--assistant-id", assistant))
            .stdout
        )
        const inUse = await cli("assistant", "delete", "--org", org.id, "--assistant", assistant)
        assert.deepStrictEqual([inUse.code, inUse.stderr.trim()], [1, "Error: Assistant is in use by an agent"])
        assert.deepStrictEqual(
          parseAll((await cli("agent", "list", "--org", org.id)).stdout).map((each) => each.id),
          [agent.id]
        )
        const updated = await cli("agent", "update", "--org", org.id, "--agent", agent.id!, "--name", "Bot 2")
        assert.strictEqual(updated.code, 0, updated.stderr)
        assert.deepStrictEqual(parse(updated.stdout), { ...agent, name: "Bot 2" })
        const wrong = await cli("agent", "update", "--org", org.id, "--agent", agent.id!, "--profile-id", "p")
        assert.strictEqual(wrong.code, 1)
        assert.match(wrong.stderr.trim(), /^Error: profile_id: /)
        assert.deepStrictEqual(
          parse((await cli("agent", "show", "--org", org.id, "--agent", agent.id!)).stdout),
          parse(updated.stdout)
        )
        const deleted = await cli("agent", "delete", "--org", org.id, "--agent", agent.id!)
        assert.deepStrictEqual([deleted.code, deleted.stdout.trim()], [0, `deleted=${agent.id}`])
        const gone = await cli("agent", "show", "--org", org.id, "--agent", agent.id!)
        assert.deepStrictEqual([gone.code, gone.stderr.trim()], [1, "Error: Agent not found"])
        const removed = await cli("assistant", "delete", "--org", org.id, "--assistant", assistant)
        assert.deepStrictEqual([removed.code, removed.stdout.trim()], [0, `deleted=${assistant}`])
        const missing = await cli("assistant", "show", "--org", org.id, "--assistant", assistant)
        assert.deepStrictEqual([missing.code, missing.stderr.trim()], [1, "Error: Assistant not found"])
        const unknownOrg = await cli("assistant", "list", "--org", crypto.randomUUID())
        assert.deepStrictEqual([unknownOrg.code, unknownOrg.stderr.trim()], [1, "Error: Organization not found"])
      }),
    // 21 CLI processes, each 2-6 s to start on a loaded two-core machine: 120 s ran out in three full runs here.
    240_000
  )

  it.live(
    "issue 17 (A12): rollout start, show and end, their input checked like the assistants API",
    () =>
      withCli(async (cli, db) => {
        const org = parse((await cli("org", "create", "--name", "Rolling")).stdout) as { id: string }
        const assistant = crypto.randomUUID()
        await db`INSERT INTO assistants (id, organization_id, name, versioned, created_at)
          VALUES (${assistant}, ${org.id}, 'Bot', true, now())`
        await db`INSERT INTO assistant_branches (organization_id, id, assistant_id, name, head_commit_id, created_at,
            updated_at)
          VALUES (${org.id}, ${crypto.randomUUID()}, ${assistant}, 'main', '0123456789ab', now(), now()),
            (${org.id}, ${crypto.randomUUID()}, ${assistant}, 'feature', '0123456789ac', now(), now()),
            (${org.id}, ${crypto.randomUUID()}, ${assistant}, 'early', NULL, now(), now())`
        const rollout = (...args: Array<string>) => cli("rollout", ...args, "--org", org.id, "--assistant", assistant)
        const none = await rollout("show")
        assert.deepStrictEqual([none.code, none.stderr.trim()], [1, "Error: No rollout"])
        const started = await rollout("start", "--branch", "feature", "--percent", "10")
        assert.strictEqual(started.code, 0, started.stderr)
        const shown = parse(started.stdout)
        assert.deepStrictEqual(
          [shown.assistant_id, shown.branch_name, shown.percent, shown.head_commit_id],
          [assistant, "feature", "10", "0123456789ac"]
        )
        assert.deepStrictEqual(parse((await rollout("show")).stdout), shown)
        const tooMuch = await rollout("start", "--branch", "feature", "--percent", "101")
        assert.strictEqual(tooMuch.code, 1)
        assert.match(tooMuch.stderr.trim(), /^Error: percent: /)
        const unpublished = await rollout("start", "--branch", "early", "--percent", "5")
        assert.deepStrictEqual(
          [unpublished.code, unpublished.stderr.trim()],
          [1, "Error: Branch has no published version"]
        )
        const ended = await rollout("end")
        assert.deepStrictEqual([ended.code, ended.stdout.trim()], [0, "rollout=ended"])
        assert.deepStrictEqual((await rollout("end")).stderr.trim(), "Error: No rollout")
      }),
    120_000
  )

  it.live(
    "issue 15 (D20), issue 40 (D21): settings set changes the rate limit and retention (none clears it), checked like the admin API; settings show prints them",
    () =>
      withCli(async (cli) => {
        const org = parse((await cli("org", "create", "--name", "Limited")).stdout) as { id: string }
        const set = await cli("settings", "set", "--org", org.id, "--rate-limit-per-second", "100")
        assert.strictEqual(set.code, 0, set.stderr)
        assert.deepStrictEqual(
          [parse(set.stdout).rate_limit_per_second, parse(set.stdout).rate_limit_burst],
          ["100", ""]
        )
        const refused = await cli("settings", "set", "--org", org.id, "--rate-limit-burst", "0")
        assert.strictEqual(refused.code, 1)
        assert.match(refused.stderr.trim(), /^Error: rate_limit_burst: /)
        const burst = await cli("settings", "set", "--org", org.id, "--rate-limit-burst", "500")
        assert.strictEqual(parse(burst.stdout).rate_limit_burst, "500")
        const cleared = await cli("settings", "set", "--org", org.id, "--rate-limit-per-second", "none")
        assert.strictEqual(parse(cleared.stdout).rate_limit_per_second, "")
        const shown = parse((await cli("settings", "show", "--org", org.id)).stdout)
        assert.deepStrictEqual(
          [shown.rate_limit_per_second, shown.rate_limit_burst, shown.reply_debounce_seconds],
          ["", "500", "3"]
        )
        // D21: retention in whole days, "none" keeps forever; checked like the admin API.
        const retention = await cli(
          "settings",
          "set",
          "--org",
          org.id,
          "--message-retention-days",
          "90",
          "--event-retention-days",
          "none"
        )
        assert.strictEqual(retention.code, 0, retention.stderr)
        assert.deepStrictEqual(
          [parse(retention.stdout).message_retention_days, parse(retention.stdout).event_retention_days],
          ["90", ""]
        )
        const tooLong = await cli("settings", "set", "--org", org.id, "--event-retention-days", "3651")
        assert.strictEqual(tooLong.code, 1)
        assert.match(tooLong.stderr.trim(), /^Error: event_retention_days: /)
      }),
    120_000
  )

  it.live(
    "org create, key create, agent create, key revoke; unknown ids fail with a message and exit 1",
    () =>
      withCli(async (cli) => {
        const org = parse((await cli("org", "create", "--name", "From CLI")).stdout) as { id: string; name: string }
        assert.strictEqual(org.name, "From CLI")
        const key = await cli("key", "create", "--org", org.id, "--name", "ops", "--expires-at", "2099-01-01T00:00:00Z")
        assert.strictEqual(key.code, 0, key.stderr)
        const created = parse(key.stdout) as { id: string; token: string; expires_at: string }
        assert.match(created.token, /^prl_[A-Za-z0-9_-]{43}$/)
        assert.strictEqual(created.expires_at, "2099-01-01T00:00:00.000000Z")
        const agent = await cli(
          "agent",
          "create",
          "--org",
          org.id,
          "--name",
          "Bot",
          "--type",
          "ai",
          "--assistant-id",
          "a1"
        )
        assert.strictEqual(agent.code, 0, agent.stderr)
        assert.strictEqual(parse(agent.stdout).type, "ai")
        const revoke = await cli("key", "revoke", "--org", org.id, "--key", created.id)
        assert.strictEqual(revoke.code, 0, revoke.stderr)
        assert.strictEqual(revoke.stdout.trim(), `revoked=${created.id}`)
        const unknown = await cli("key", "revoke", "--org", org.id, "--key", "01a20254-e46f-73c4-a817-d7a14c37efe6")
        assert.strictEqual(unknown.code, 1)
        assert.include(unknown.stderr, "API key not found")
        const noAssistant = await cli("agent", "create", "--org", org.id, "--name", "Bot", "--type", "ai")
        assert.strictEqual(noAssistant.code, 1)
        assert.strictEqual(noAssistant.stderr.trim(), "Error: assistant_id: Field required")
      }),
    // Six CLI processes, each 2-3 s alone (loading the module graph) and up to 10 s while CI runs test files in
    // parallel on two cores: 60 s was exceeded once (CI of 2026-11-27), so the same budget as the tests above.
    120_000
  )

  it.live(
    "issue 37 item 3 (O6): org, key and agent create check their input as the admin API does; refused input creates nothing",
    () =>
      withCli(async (cli, db) => {
        const long = "x".repeat(256)
        const emptyName = await cli("org", "create", "--name", "")
        assert.strictEqual(emptyName.code, 1)
        assert.strictEqual(emptyName.stderr.trim(), "Error: name: String should have between 1 and 255 characters")
        const org = parse((await cli("org", "create", "--name", "Checked")).stdout) as { id: string }
        const longKey = await cli("key", "create", "--org", org.id, "--name", long)
        assert.strictEqual(longKey.code, 1)
        assert.strictEqual(longKey.stderr.trim(), "Error: name: String should have at most 255 characters")
        // The admin API takes a moment with its time zone only (D18); so does the CLI.
        const noZone = await cli("key", "create", "--org", org.id, "--expires-at", "2099-01-01")
        assert.strictEqual(noZone.code, 1)
        assert.match(noZone.stderr.trim(), /^Error: expires_at: /)
        const agent = await cli(
          "agent",
          "create",
          "--org",
          org.id,
          "--name",
          "",
          "--type",
          "ai",
          "--assistant-id",
          long
        )
        assert.strictEqual(agent.code, 1)
        assert.strictEqual(
          agent.stderr.trim(),
          "Error: name: String should have between 1 and 255 characters; assistant_id: String should have between 1 and 255 characters"
        )
        const [counts] = await db<Array<{ organizations: number; keys: number; agents: number }>>`
        SELECT (SELECT count(*)::int FROM organizations WHERE name = '') AS organizations,
               (SELECT count(*)::int FROM api_keys WHERE organization_id = ${org.id}) AS keys,
               (SELECT count(*)::int FROM agents WHERE organization_id = ${org.id}) AS agents`
        assert.deepStrictEqual(counts, { organizations: 0, keys: 0, agents: 0 })
      }),
    120_000
  )

  it.live(
    "issue 40 item 2 (D22): contact erase prints the pending erasure, again the same one; erasure show; 404s as errors",
    () =>
      withCli(async (cli, db) => {
        const org = parse((await cli("org", "create", "--name", "Erasing")).stdout) as { id: string }
        await db`INSERT INTO contacts (organization_id, contact_id, name, created_at)
          VALUES (${org.id}, '+15550123', 'Ada', now())`
        const first = await cli("contact", "erase", "--org", org.id, "--contact", "+15550123")
        assert.strictEqual(first.code, 0, first.stderr)
        const erasure = parse(first.stdout)
        assert.deepStrictEqual(Object.keys(erasure), ["id", "contact_id", "status", "requested_at", "completed_at"])
        assert.strictEqual(erasure.contact_id, "+15550123")
        assert.strictEqual(erasure.status, "pending")
        const again = await cli("contact", "erase", "--org", org.id, "--contact", "+15550123")
        assert.deepStrictEqual(parse(again.stdout), erasure)
        const shown = await cli("erasure", "show", "--org", org.id, "--erasure", erasure.id!)
        assert.deepStrictEqual(parse(shown.stdout), erasure)
        const unknown = await cli("contact", "erase", "--org", org.id, "--contact", "nobody")
        assert.strictEqual(unknown.code, 1)
        assert.strictEqual(unknown.stderr.trim(), "Error: Contact not found")
        const missing = await cli("erasure", "show", "--org", org.id, "--erasure", crypto.randomUUID())
        assert.strictEqual(missing.code, 1)
        assert.strictEqual(missing.stderr.trim(), "Error: Erasure not found")
      }),
    120_000
  )

  it.live(
    "serve runs the server as npm start does: ready, the API responding, exit 0 on SIGTERM (O5)",
    () =>
      Effect.promise(async () => {
        const server = await startServer({ DATABASE_URL: databaseUrl() }, 60_000, ["src/cli.ts", "serve"])
        try {
          const document = await fetch(`${server.baseUrl}/openapi.json`)
          assert.strictEqual(document.status, 200)
          assert.strictEqual(((await document.json()) as { openapi: string }).openapi, "3.1.0")
          const unauthorized = await fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ contact_id: "+15550001" })
          })
          assert.strictEqual(unauthorized.status, 401)
        } finally {
          server.child.kill("SIGTERM")
        }
        assert.strictEqual(await server.exited, 0, server.output())
      }),
    120_000
  )
})
