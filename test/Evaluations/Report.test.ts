/**
 * The evaluation report (issue 41 item 5; A16, A17; src/Evaluations/Report.ts)
 * over a fixture of a dozen turns of a judged evaluation: seven changed (reply
 * text, node path, tool calls with new arguments and an unrecorded call, a
 * baseline whose repeats differ), one candidate reply holding a `<script>`,
 * five unchanged. Its summary is counted from its turns, with the Wilson 95%
 * interval, as A16 defines them.
 *
 * - The HTML itself: one document referring to nothing outside it, every
 *   value escaped, the summary's numbers, the changed turns and the unchanged
 *   ones counted; an evaluation still running shows its progress instead.
 * - In headless Chromium (test/support/Chromium.ts) at 1280x800, with every
 *   request besides the page's own counted and refused: the first viewport,
 *   unscrolled, shows the headline ("Changed 7 of 12 turns"), the changed rate
 *   with its interval and the gate's numbers, nothing else is requested and
 *   nothing is logged; further down, the chart has a bar per node, the changed
 *   turns stand side by side, the `<script>` is text that never ran. The
 *   first viewport and the whole page are saved in test/artifacts/
 *   (`evaluation-report-first-viewport.png`, `evaluation-report-page.png`).
 */
import * as fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { type Browser, chromium, type Page } from "playwright-core"
import type {
  Evaluation,
  EvaluationSummary,
  EvaluationTurn,
  SideStats,
  ToolCallRecord as ToolCall,
  TurnAnswer
} from "../../src/Domain/Evaluation.ts"
import { REPORT_CONTENT_SECURITY_POLICY, renderReport } from "../../src/Evaluations/Report.ts"
import { artifact, CHROMIUM, CHROMIUM_ARGS, chromiumAvailable, inFirstViewport, seen } from "../support/Chromium.ts"

// ---------------------------------------------------------------------------
// The fixture
// ---------------------------------------------------------------------------

const answer = (text: string, nodes: ReadonlyArray<string>, tool_calls: ReadonlyArray<ToolCall> = []): TurnAnswer => ({
  text,
  nodes,
  tool_calls,
  error: null
})

const uuid = (kind: number, n: number) => `0193${kind}a4e-5f10-7c2d-8000-${String(n).padStart(12, "0")}`

let sequence = 0
/** A turn at `node_id`, unchanged unless `fields` say otherwise; ids made up. */
const turn = (
  fields: Partial<EvaluationTurn> & Pick<EvaluationTurn, "node_id" | "recorded" | "baseline" | "candidate">
): EvaluationTurn => {
  sequence++
  return {
    id: uuid(1, sequence),
    session_id: uuid(2, sequence),
    run_id: uuid(3, sequence),
    should_close: false,
    verdict: null,
    text_changed: false,
    path_changed: false,
    tools_changed: false,
    similarity: 1,
    ...fields
  }
}

const invoice = (month: string) => ({
  invoice: `INV-${month.replace("-", "")}`,
  amount: "48.00",
  currency: "EUR",
  paid_at: `${month}-28`
})
const lookup = (args: Record<string, unknown>, result: unknown): ToolCall => ({
  node_id: "billing",
  tool_id: "lookup_invoice",
  arguments: args,
  result
})
const unrecorded = (args: Record<string, unknown>): ToolCall => ({
  node_id: "billing",
  tool_id: "lookup_invoice",
  arguments: args,
  result: { error: "No recorded result" }
})

/** The reply text that must stay text (issue 41 item 5): a model echoing a script a user sent. */
const SCRIPT_TEXT = "Sure, paste this into the console: <script>window.__pwned = 1</script> and reload."
/** Tool arguments that would close the text and open an image, were they not escaped. */
const ATTACK_ARGUMENT = '</code></p><img src="http://attacker.test/x.png" onerror="window.__pwned = 2">'

const greeting = "Hello! I'm the Acme assistant. How can I help you today?"
const TURNS: ReadonlyArray<EvaluationTurn> = [
  turn({
    node_id: "billing",
    recorded: answer(
      "Your March invoice INV-202603 came to 48.00 EUR and was paid on 28 March. Anything else?",
      ["billing"],
      [lookup({ customer_id: "c_118", month: "2026-03" }, invoice("2026-03"))]
    ),
    baseline: [
      answer(
        "Your March invoice INV-202603 came to 48.00 EUR and was paid on 28 March. Anything else?",
        ["billing"],
        [lookup({ customer_id: "c_118", month: "2026-03" }, invoice("2026-03"))]
      )
    ],
    candidate: [
      answer(
        "I'm sorry, I can't see invoices. Please write to billing@example.com and they will help you.",
        ["billing"],
        [lookup({ month: "2026-03", customer_id: "c_118" }, invoice("2026-03"))]
      )
    ],
    text_changed: true,
    similarity: 0.08,
    verdict: "worse"
  }),
  turn({
    node_id: "greet",
    recorded: answer(greeting, ["greet"]),
    baseline: [answer(greeting, ["greet"])],
    candidate: [answer(greeting, ["greet"])]
  }),
  turn({
    node_id: "billing",
    recorded: answer(
      "Your latest invoice, INV-202603, is paid.",
      ["billing"],
      [lookup({ customer_id: "c_204", month: "2026-03" }, invoice("2026-03"))]
    ),
    baseline: [
      answer(
        "Your latest invoice, INV-202603, is paid.",
        ["billing"],
        [lookup({ customer_id: "c_204", month: "2026-03" }, invoice("2026-03"))]
      )
    ],
    candidate: [
      answer(
        "Your latest invoice, INV-202603, is paid.",
        ["billing"],
        [unrecorded({ customer_id: "c_204", month: "2026-04" })]
      )
    ],
    tools_changed: true,
    similarity: 1,
    verdict: "same"
  }),
  turn({
    node_id: "refunds",
    recorded: answer("Refunds take 5 to 7 working days to reach your card.", ["refunds"]),
    baseline: [answer("Refunds take 5 to 7 working days to reach your card.", ["refunds"])],
    candidate: [answer(SCRIPT_TEXT, ["refunds"])],
    text_changed: true,
    similarity: 0,
    verdict: "worse"
  }),
  turn({
    node_id: "billing",
    should_close: true,
    recorded: answer("I've passed you to a colleague from billing; they'll reply here shortly.", [
      "billing",
      "handoff"
    ]),
    baseline: [answer("Glad I could help. Have a nice day!", ["billing", "faq"])],
    candidate: [
      answer("I've passed you to a colleague from billing; they'll reply here shortly.", ["billing", "handoff"])
    ],
    text_changed: true,
    path_changed: true,
    similarity: 0.05,
    verdict: "better"
  }),
  turn({
    node_id: "q&a",
    recorded: answer(
      'The "Pro" plan includes <b>unlimited</b> seats & priority support.',
      ["q&a"],
      [{ node_id: "q&a", tool_id: "search_docs", arguments: { query: ATTACK_ARGUMENT }, result: { hits: 0 } }]
    ),
    baseline: [
      answer(
        'The "Pro" plan includes <b>unlimited</b> seats & priority support.',
        ["q&a"],
        [{ node_id: "q&a", tool_id: "search_docs", arguments: { query: ATTACK_ARGUMENT }, result: { hits: 0 } }]
      )
    ],
    candidate: [
      answer(
        'The "Pro" plan includes unlimited seats, priority support & a 99.9% SLA.',
        ["q&a"],
        [{ node_id: "q&a", tool_id: "search_docs", arguments: { query: ATTACK_ARGUMENT }, result: { hits: 0 } }]
      )
    ],
    text_changed: true,
    similarity: 0.6,
    verdict: "same"
  }),
  turn({
    node_id: "refunds",
    recorded: answer("You can ask for a refund within 30 days of purchase.", ["refunds"]),
    baseline: [answer("You can ask for a refund within 30 days of purchase.", ["refunds"])],
    candidate: [answer("You can ask for a refund within 30 days of purchase.", ["refunds"])]
  }),
  turn({
    node_id: "greet",
    recorded: answer(greeting, ["greet"]),
    baseline: [answer(greeting, ["greet"])],
    candidate: [answer("Hi there! I can help with invoices, refunds and plans. What do you need?", ["greet"])],
    text_changed: true,
    similarity: 0.14,
    verdict: "better"
  }),
  turn({
    node_id: "refunds",
    recorded: answer("Your refund for order 5521 was sent on 12 November.", ["refunds"]),
    baseline: [
      answer("Your refund for order 5521 was sent on 12 November.", ["refunds"]),
      answer("The refund for order 5521 went out on 12 November.", ["refunds"])
    ],
    candidate: [
      answer("Your refund for order 5521 was sent on 12 November and should arrive within a week.", ["refunds"]),
      answer("Your refund for order 5521 was sent on 12 November and should arrive within a week.", ["refunds"])
    ],
    text_changed: true,
    similarity: 0.62,
    verdict: "same"
  }),
  turn({
    node_id: "billing",
    recorded: answer("We accept cards and SEPA direct debit.", ["billing"]),
    baseline: [answer("We accept cards and SEPA direct debit.", ["billing"])],
    candidate: [answer("We accept cards and SEPA direct debit.", ["billing"])]
  }),
  turn({
    node_id: "q&a",
    recorded: answer("Yes, the Team plan has single sign-on.", ["q&a"]),
    baseline: [answer("Yes, the Team plan has single sign-on.", ["q&a"])],
    candidate: [answer("Yes, the Team plan has single sign-on.", ["q&a"])]
  }),
  turn({
    node_id: "greet",
    recorded: answer(greeting, ["greet"]),
    baseline: [answer(greeting, ["greet"])],
    candidate: [answer(greeting, ["greet"])]
  })
]

const changed = (t: EvaluationTurn) => t.text_changed || t.path_changed || t.tools_changed

/** The Wilson score interval of `successes` of `n` at 95% (A16), as [low, high]. */
const wilson = (successes: number, n: number): readonly [number, number] => {
  const z = 1.959963984540054
  const p = successes / n
  const denominator = 1 + (z * z) / n
  const centre = (p + (z * z) / (2 * n)) / denominator
  const margin = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / denominator
  return [centre - margin, centre + margin]
}

const count = (predicate: (t: EvaluationTurn) => boolean) => TURNS.filter(predicate).length
const byNode: Record<string, number> = {}
for (const t of TURNS.filter(changed)) byNode[t.node_id] = (byNode[t.node_id] ?? 0) + 1
const side = (p50: number, p95: number, input_tokens: number, output_tokens: number): SideStats => ({
  duration_ms: { p50, p95 },
  input_tokens,
  output_tokens
})

/** The summary A16 defines, counted from {@link TURNS}. */
const SUMMARY: EvaluationSummary = {
  turns: TURNS.length,
  changed: count(changed),
  changed_rate: count(changed) / TURNS.length,
  interval: wilson(count(changed), TURNS.length),
  text_changed: count((t) => t.text_changed),
  path_changed: count((t) => t.path_changed),
  tools_changed: count((t) => t.tools_changed),
  unrecorded_tool_calls: TURNS.flatMap((t) => [...t.baseline, ...t.candidate])
    .flatMap((a) => a.tool_calls)
    .filter((call) => JSON.stringify(call.result) === '{"error":"No recorded result"}').length,
  baseline_unstable: count((t) => new Set(t.baseline.map((a) => JSON.stringify(a))).size > 1),
  baseline: side(812, 1930, 48_210, 3_120),
  candidate: side(905, 2210, 51_877, 3_398),
  by_node: byNode,
  verdicts: {
    better: count((t) => t.verdict === "better"),
    same: count((t) => t.verdict === "same"),
    worse: count((t) => t.verdict === "worse")
  }
}

const EVALUATION: Evaluation = {
  id: "01937a4e-0000-7c2d-8000-00000000e041",
  assistant_id: "01937a4e-0000-7c2d-8000-0000000a5157",
  status: "completed",
  baseline: { branch_name: "main" },
  candidate: { branch_name: "tone-update", draft: true },
  baseline_commit_id: "3f9c2a71b0de",
  candidate_commit_id: "a81d44e0c97b",
  repeats: 1,
  judge: { instructions: "Prefer short, correct replies." },
  error: null,
  completed_at: "2026-11-28T10:01:00.000000Z",
  turns_total: 12,
  turns_done: 12,
  created_at: "2026-11-28T21:14:09.512Z",
  summary: SUMMARY
}

/** What the fixture's summary reads as (7 of 12: 58.3%, Wilson 95% 32.0% to 80.7%). */
const HEADLINE = "Changed 7 of 12 turns"
const INTERVAL = "58.3% changed · 95% interval 32.0%\u201380.7%"

const REPORT = renderReport({ evaluation: EVALUATION, turns: TURNS })

// ---------------------------------------------------------------------------
// The HTML
// ---------------------------------------------------------------------------

describe("renderReport (issue 41 item 5)", () => {
  it("the fixture is the summary A16 defines: 7 of 12 changed, Wilson 95% [0.3195, 0.8067], 2 worse", () => {
    assert.strictEqual(SUMMARY.changed, 7)
    assert.strictEqual(SUMMARY.interval[0].toFixed(4), "0.3195")
    assert.strictEqual(SUMMARY.interval[1].toFixed(4), "0.8067")
    assert.deepStrictEqual(SUMMARY.by_node, { billing: 3, refunds: 2, "q&a": 1, greet: 1 })
    assert.deepStrictEqual(SUMMARY.verdicts, { better: 2, same: 3, worse: 2 })
    assert.strictEqual(SUMMARY.unrecorded_tool_calls, 1)
    assert.strictEqual(SUMMARY.baseline_unstable, 1)
  })

  it("is one document that refers to nothing outside it: no script, link, URL attribute, url() or @import", () => {
    assert.match(REPORT, /^<!doctype html>\n<html lang="en">/)
    assert.strictEqual(REPORT.match(/<html/g)?.length, 1)
    assert.notMatch(REPORT, /<script|<link|<img|<iframe|<object|<embed|<base/i)
    // A value's quotes are escaped, so `name="` is markup's own.
    assert.notMatch(REPORT, /\s(?:src|href|srcset|action|poster|xlink:href)\s*=\s*"/i)
    assert.notMatch(REPORT, /url\(|@import|@font-face/i)
    // The policy forbids every fetch (its quotes escaped as the attribute's value).
    assert.include(REPORT, `content="${REPORT_CONTENT_SECURITY_POLICY.replaceAll("'", "&#39;")}"`)
    assert.include(REPORT_CONTENT_SECURITY_POLICY, "default-src 'none'")
  })

  it("escapes every value: reply texts, node ids and tool arguments stay text", () => {
    assert.include(REPORT, "&lt;script&gt;window.__pwned = 1&lt;/script&gt;")
    assert.notInclude(REPORT, "<script>window.__pwned")
    assert.notInclude(REPORT, "<img")
    assert.include(REPORT, "&lt;b&gt;unlimited&lt;/b&gt;")
    assert.include(REPORT, "&quot;Pro&quot;")
    // The node id "q&a" in text, in the chart's attributes and labels: its "&" always an entity.
    assert.notMatch(REPORT, /q&(?!amp;)/)
    assert.include(REPORT, 'data-node="q&amp;a"')
  })

  it("shows the summary, a bar per node, seven changed turns and five unchanged ones counted", () => {
    const text = REPORT.replace(/<[^>]+>/g, "")
    assert.include(text, HEADLINE)
    assert.include(text, INTERVAL)
    assert.strictEqual(REPORT.match(/<g class="bar"/g)?.length, 4)
    assert.strictEqual(REPORT.match(/<article class="turn"/g)?.length, 7)
    assert.include(text, "5 unchanged turns")
    assert.strictEqual(REPORT.match(/<span class="verdict worse">/g)?.length, 2)
    assert.strictEqual(REPORT.match(/<span class="verdict better">/g)?.length, 2)
    assert.strictEqual(REPORT.match(/<span class="verdict same">/g)?.length, 3)
    // Worst first: the two worse turns lead.
    const first = REPORT.indexOf('<article class="turn"')
    assert.include(REPORT.slice(first, REPORT.indexOf("</header>", first)), "verdict worse")
    assert.include(text, "1 more repeat")
  })

  it("an evaluation still running shows its progress, no summary and no chart", () => {
    const running = renderReport({
      evaluation: { ...EVALUATION, status: "running", turns_done: 4, summary: null },
      turns: TURNS.slice(0, 4)
    })
    const text = running.replace(/<[^>]+>/g, "")
    assert.include(text, "Evaluation running")
    assert.include(text, "4 of 12 turns answered")
    assert.notInclude(running, 'id="chart"')
    assert.notInclude(running, 'id="interval"')
  })

  it("an evaluation without a judge says so and shows no verdict", () => {
    const unjudged = renderReport({
      evaluation: { ...EVALUATION, summary: { ...SUMMARY, verdicts: null } },
      turns: TURNS.map((turn) => ({ ...turn, verdict: null }))
    })
    assert.include(unjudged, "not judged")
    assert.notInclude(unjudged, 'class="verdict')
    assert.notInclude(unjudged, "judged worse")
  })
})

// ---------------------------------------------------------------------------
// In Chromium
// ---------------------------------------------------------------------------

const available = chromiumAvailable("test/Evaluations/Report.test.ts")

/** The window the issue names, in CSS pixels. */
const VIEWPORT = { width: 1280, height: 800 }

/** Where the page is served from (never resolved: every request is answered or refused in the browser). */
const PAGE_URL = "http://parley.test/assistants/a/evaluations/e/report"

/** What the page did besides rendering: every request it made, console warnings and errors, uncaught errors. */
interface PageLog {
  readonly requests: Array<string>
  readonly complaints: Array<string>
}

/**
 * Opens `html` at {@link PAGE_URL} in a fresh Chromium at {@link VIEWPORT}:
 * the page's own request is answered with it, every other request is recorded
 * and refused; runs `use` on the loaded page and closes the browser.
 */
const onPage = async <A>(html: string, use: (page: Page, log: PageLog) => Promise<A>): Promise<A> => {
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  try {
    const context = await browser.newContext({ viewport: VIEWPORT })
    const log: PageLog = { requests: [], complaints: [] }
    context.on("request", (request) => log.requests.push(request.url()))
    await context.route("**/*", (route) =>
      route.request().url() === PAGE_URL
        ? route.fulfill({ status: 200, contentType: "text/html; charset=utf-8", body: html })
        : route.abort("blockedbyclient")
    )
    const page = await context.newPage()
    page.on("console", (message) => {
      if (message.type() === "warning" || message.type() === "error") {
        log.complaints.push(`${message.type()}: ${message.text()}`)
      }
    })
    page.on("pageerror", (error) => log.complaints.push(`uncaught: ${error.message}`))
    await page.goto(PAGE_URL, { waitUntil: "load" })
    return await use(page, log)
  } finally {
    await browser.close()
  }
}

describe("the report in Chromium (issue 41 item 5)", () => {
  it.skipIf(!available)(
    "at 1280x800 the first viewport shows the headline, the changed rate with its interval and the gate's numbers; nothing else is requested",
    async () => {
      const outcome = await onPage(REPORT, async (page, log) => {
        const screenshot = artifact("evaluation-report-first-viewport.png")
        await page.screenshot({ path: screenshot })
        return {
          log,
          screenshot,
          scrollY: await page.evaluate<number>("window.scrollY"),
          scrollWidth: await page.evaluate<number>("document.documentElement.scrollWidth"),
          headline: { text: await page.locator("#headline").innerText(), seen: await seen(page.locator("#headline")) },
          interval: { text: await page.locator("#interval").innerText(), seen: await seen(page.locator("#interval")) },
          gate: { text: await page.locator("#gate").innerText(), seen: await seen(page.locator("#gate")) },
          worse: { text: await page.locator("#worse").innerText(), seen: await seen(page.locator("#worse")) },
          summary: await seen(page.locator("section.summary")),
          headlineSize: await page
            .locator("#headline")
            .evaluate((element) => element.ownerDocument.defaultView.getComputedStyle(element).fontSize)
        }
      })
      assert.strictEqual(outcome.scrollY, 0, "the page is seen as it opens, unscrolled")
      assert.strictEqual(outcome.headline.text, HEADLINE)
      assert.strictEqual(outcome.interval.text, INTERVAL)
      assert.include(outcome.gate.text, "upper end, 80.7%")
      assert.include(outcome.gate.text, "judged worse (2 here)")
      assert.strictEqual(outcome.worse.text.replace(/\s+/g, " "), "2 judged worse")
      for (const [what, where] of [
        ["the headline", outcome.headline.seen],
        ["the changed rate and its interval", outcome.interval.seen],
        ["the gate's numbers", outcome.gate.seen],
        ["the worse verdicts", outcome.worse.seen],
        ["the whole summary", outcome.summary]
      ] as const) {
        assert.isTrue(
          inFirstViewport(where, VIEWPORT),
          `${what} is seen in the first 1280x800 viewport: ${JSON.stringify(where)}`
        )
      }
      assert.isAtLeast(Number.parseFloat(outcome.headlineSize), 28, "the headline is large")
      assert.isAtMost(outcome.scrollWidth, VIEWPORT.width, "nothing runs off the side: no horizontal scrolling")
      assert.deepStrictEqual(outcome.log.requests, [PAGE_URL], "the page requests nothing but itself")
      assert.deepStrictEqual(outcome.log.complaints, [], "the page logs no warning or error")
      assert.isAbove(fs.statSync(outcome.screenshot).size, 10_000)
    },
    60_000
  )

  it.skipIf(!available)(
    "further down: a bar per node, most changed first; seven turns side by side; the <script> reply is text that never ran; unchanged turns folded",
    async () => {
      const outcome = await onPage(REPORT, async (page, log) => {
        const screenshot = artifact("evaluation-report-page.png")
        await page.screenshot({ path: screenshot, fullPage: true })
        const bars = page.locator("#chart g.bar")
        const script = page.getByText("<script>window.__pwned = 1</script>", { exact: false }).first()
        await script.scrollIntoViewIfNeeded()
        return {
          log,
          screenshot,
          bars: await bars.evaluateAll((groups) =>
            groups.map((group) => ({
              node: group.getAttribute("data-node"),
              label: group.querySelector(".label")?.textContent,
              width: group.querySelector("rect.changed")?.getBoundingClientRect().width ?? 0
            }))
          ),
          chartSeen: (await page.locator("#chart").boundingBox()) !== null,
          columns: await page
            .locator("article.turn")
            .evaluateAll((turns) =>
              turns.map((article) => [...article.querySelectorAll(".col > h4")].map((h) => h.textContent))
            ),
          scriptSeen: await seen(script),
          scripts: await page.locator("script").count(),
          pwned: await page.evaluate<unknown>("window.__pwned"),
          images: await page.locator("img").count(),
          unchanged: await page.locator("#unchanged > summary").innerText(),
          unchangedRowsVisible: await page.locator("#unchanged tbody tr").first().isVisible()
        }
      })
      assert.deepStrictEqual(
        outcome.bars.map((bar) => [bar.node, bar.label]),
        [
          ["billing", "billing"],
          ["refunds", "refunds"],
          ["greet", "greet"],
          ["q&a", "q&a"]
        ]
      )
      const [billing, refunds, greet] = outcome.bars
      assert.isTrue(billing!.width > refunds!.width && refunds!.width > greet!.width, JSON.stringify(outcome.bars))
      assert.isTrue(outcome.chartSeen)
      assert.strictEqual(outcome.columns.length, 7)
      for (const columns of outcome.columns) assert.deepStrictEqual(columns, ["Recorded", "Baseline", "Candidate"])
      assert.isTrue(outcome.scriptSeen.visible, "the <script> reply is shown as text")
      assert.strictEqual(outcome.scripts, 0)
      assert.isUndefined(outcome.pwned, "nothing from a turn ran")
      assert.strictEqual(outcome.images, 0)
      assert.strictEqual(outcome.unchanged, "5 unchanged turns")
      assert.isFalse(outcome.unchangedRowsVisible, "unchanged turns are folded")
      assert.deepStrictEqual(outcome.log.requests, [PAGE_URL])
      assert.deepStrictEqual(outcome.log.complaints, [])
      assert.isAbove(fs.statSync(outcome.screenshot).size, 30_000)
    },
    60_000
  )
})
