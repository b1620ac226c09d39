/**
 * The evaluation report (issue 41 item 5; A16, A17): one self-contained HTML
 * page that `GET /assistants/{id}/evaluations/{eval_id}/report` answers, for a
 * person who would rather look than read JSON.
 *
 * Top to bottom, at 1280x800 the first screen holding the first two:
 *
 * 1. What was compared (baseline and candidate, their commits, the status) and
 *    the headline: "Changed X of Y turns", the changed rate with its Wilson 95%
 *    interval drawn on a 0-100% scale, and what a CI gate (issue 41 item 4)
 *    looks at: the interval's upper end and the `worse` verdicts (A17); then
 *    the kinds of change, unrecorded tool calls, unstable baselines and each
 *    side's duration and tokens.
 * 2. A bar chart (inline SVG) of changed turns per starting node (`by_node`).
 * 3. The changed turns, worst first, each with recorded | baseline |
 *    candidate side by side: reply text (the words that differ between
 *    baseline and candidate marked), node path, tool calls as compact JSON,
 *    similarity and verdict. Unchanged turns are counted and folded away.
 *
 * Nothing on the page makes a request: CSS and the charts are inline, no
 * script, no font, no image, no link to anything, and a Content Security
 * Policy ({@link REPORT_CONTENT_SECURITY_POLICY}) in the page forbids every
 * fetch besides. Every value from the evaluation (reply texts, node ids, tool
 * arguments) is escaped: the page is built with {@link html}, which escapes
 * whatever it is given unless it is markup {@link html} built itself.
 *
 * The module is pure (no database, no Effect): {@link renderReport} takes the
 * evaluation and its turns as A16's JSON answers carry them.
 */
import type {
  Evaluation,
  EvaluationSide,
  EvaluationSummary,
  EvaluationTurn,
  SideStats,
  ToolCallRecord as ToolCall,
  TurnAnswer,
  Verdict
} from "../Domain/Evaluation.ts"
import { callKey as recordKey } from "../Runtime/Records.ts"

// ---------------------------------------------------------------------------
// The input: A16's wire shapes (`Domain/Evaluation.ts`; `ToolCall` is a run record, A15)
// ---------------------------------------------------------------------------

/** What {@link renderReport} draws: the evaluation and its turns (all of them, or at least every changed one). */
export interface ReportInput {
  readonly evaluation: Evaluation
  readonly turns: ReadonlyArray<EvaluationTurn>
}

// ---------------------------------------------------------------------------
// Markup that escapes by construction
// ---------------------------------------------------------------------------

/** Markup built by {@link html}: the only value {@link html} inserts without escaping it. */
class Html {
  readonly markup: string
  constructor(markup: string) {
    this.markup = markup
  }
}

/** What {@link html} accepts between its strings; nothing (`undefined`, `null`, `false`) inserts nothing. */
type Part = Html | string | number | ReadonlyArray<Part> | undefined | null | false

const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;"
}

/** `text` with the five characters that mean something in HTML text and quoted attributes written as entities. */
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (character) => ENTITIES[character]!)

const partMarkup = (part: Part): string =>
  part instanceof Html
    ? part.markup
    : Array.isArray(part)
      ? part.map(partMarkup).join("")
      : part === undefined || part === null || part === false
        ? ""
        : escapeHtml(String(part))

/**
 * A template tag for HTML and SVG: the template's own text as written, every
 * value escaped unless it is {@link Html}.
 */
const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Part>): Html =>
  new Html(strings.reduce((markup, text, index) => markup + partMarkup(values[index - 1]) + text))

// ---------------------------------------------------------------------------
// Numbers and names
// ---------------------------------------------------------------------------

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 })

/** A fraction (0 to 1) as a percentage with one decimal: `0.5833` -> `58.3%`. */
const percent = (fraction: number) => `${(fraction * 100).toFixed(1)}%`

/** The candidate's change against the baseline as a signed percentage (`+12%`), or "" when the baseline is 0. */
const relative = (baseline: number, candidate: number) => {
  if (baseline === 0) return ""
  const change = Math.round(((candidate - baseline) / baseline) * 100)
  return change > 0 ? `+${change}%` : change < 0 ? `\u2212${-change}%` : "\u00b10%"
}

/** How a side was chosen, for people: `main`, `feature (draft)` or `commit 1a2b3c4d5e6f`. */
const sideName = (side: EvaluationSide) => {
  if ("commit_id" in side) return `commit ${side.commit_id}`
  return side.draft === true ? `${side.branch_name} (draft)` : side.branch_name
}

/** `text` cut to `max` characters with an ellipsis and the full length when longer. */
const cut = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max)}\u2026 (${integer.format(text.length)} characters)`

/** Compact JSON of `value` (`undefined` as `null`). */
const json = (value: unknown) => JSON.stringify(value) ?? "null"

// ---------------------------------------------------------------------------
// What differs between the baseline's answer and the candidate's
// ---------------------------------------------------------------------------

/** A run of words (with the spaces between them) that is in both texts or only in one. */
interface Segment {
  readonly text: string
  readonly changed: boolean
}

/** The most cells of the longest-common-subsequence table a word diff builds (8 MB); longer texts go unmarked. */
const MAX_DIFF_CELLS = 2_000_000

/** Groups `tokens` (words and runs of whitespace) into segments; a space between two changed words is changed. */
const segmentsOf = (tokens: ReadonlyArray<string>, kept: ReadonlyArray<boolean>): Array<Segment> => {
  const segments: Array<{ text: string; changed: boolean }> = []
  tokens.forEach((token, index) => {
    const changed = /^\s+$/.test(token)
      ? index > 0 && index < tokens.length - 1 && !kept[index - 1] && !kept[index + 1]
      : !kept[index]
    const last = segments.at(-1)
    if (last !== undefined && last.changed === changed) last.text += token
    else segments.push({ text: token, changed })
  })
  return segments
}

/**
 * The words of `before` and `after` marked changed where they are not in the
 * texts' longest common subsequence of words (whitespace kept as written), or
 * `undefined` when the texts are too long to compare ({@link MAX_DIFF_CELLS}).
 */
const wordDiff = (before: string, after: string) => {
  const a = before.split(/(\s+)/).filter((token) => token !== "")
  const b = after.split(/(\s+)/).filter((token) => token !== "")
  const width = b.length + 1
  if ((a.length + 1) * width > MAX_DIFF_CELLS) return undefined
  // common[i * width + j]: the length of the longest common subsequence of a[i..] and b[j..].
  const common = new Uint32Array((a.length + 1) * width)
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i * width + j] =
        a[i] === b[j]
          ? common[(i + 1) * width + j + 1]! + 1
          : Math.max(common[(i + 1) * width + j]!, common[i * width + j + 1]!)
    }
  }
  const keptA = a.map(() => false)
  const keptB = b.map(() => false)
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      keptA[i++] = true
      keptB[j++] = true
    } else if (common[(i + 1) * width + j]! >= common[i * width + j + 1]!) i++
    else j++
  }
  return { before: segmentsOf(a, keptA), after: segmentsOf(b, keptB) }
}

/** A tool call's identity for comparison (A16): its tool id and RFC 8785 canonical arguments. */
/** A call's match key: the one rule of `Runtime/Records.ts` (tool id and RFC 8785 canonical arguments, A16). */
const callKey = (call: ToolCall) => recordKey(call.tool_id, call.arguments)

/** For each call of `calls`, whether no call of `others` matches it (each of `others` matching one call at most). */
const unmatchedCalls = (calls: ReadonlyArray<ToolCall>, others: ReadonlyArray<ToolCall>) => {
  const left = new Map<string, number>()
  for (const other of others) left.set(callKey(other), (left.get(callKey(other)) ?? 0) + 1)
  return calls.map((call) => {
    const count = left.get(callKey(call)) ?? 0
    if (count > 0) left.set(callKey(call), count - 1)
    return count === 0
  })
}

// ---------------------------------------------------------------------------
// The parts of the page
// ---------------------------------------------------------------------------

/** Absent: `null` or `undefined`, as a JSON answer or a decoded one leaves an optional value. */
const absent = (value: unknown): value is null | undefined => value === null || value === undefined

/** The evaluation's sides, status, creation time and progress. */
const heading = (evaluation: Evaluation) => {
  const baseline = sideName(evaluation.baseline)
  const candidate = sideName(evaluation.candidate)
  const commit = (id: string | null | undefined) => (absent(id) ? "" : ` at ${id}`)
  const done = `${integer.format(evaluation.turns_done)} of ${integer.format(evaluation.turns_total)} turns done`
  return html`<header class="top">
  <p class="eyebrow">
    Parley evaluation <code>${evaluation.id}</code> of assistant <code>${evaluation.assistant_id}</code>
  </p>
  <h1>${candidate} <span class="against">against</span> ${baseline}</h1>
  <p class="meta">
    <span class="status ${evaluation.status}">${evaluation.status}</span>
    created ${evaluation.created_at} · ${done} ·
    baseline ${baseline}${commit(evaluation.baseline_commit_id)} ·
    candidate ${candidate}${commit(evaluation.candidate_commit_id)}
  </p>
</header>`
}

/** The changed rate (a dot) and its interval (a band) on a 0-100% scale, 320x44 CSS pixels. */
const intervalGauge = (summary: EvaluationSummary) => {
  const x = (fraction: number) => 20 + Math.min(1, Math.max(0, fraction)) * 280
  const [low, high] = summary.interval
  const label = `Changed rate ${percent(summary.changed_rate)}, 95% interval ${percent(low)} to ${percent(high)}`
  const ticks = [0, 0.25, 0.5, 0.75, 1].map(
    (tick) => html`<line x1="${x(tick)}" y1="11" x2="${x(tick)}" y2="21" class="tick" />
  <text x="${x(tick)}" y="38" text-anchor="middle">${tick * 100}%</text>`
  )
  return html`<svg class="gauge" width="320" height="44" viewBox="0 0 320 44" role="img" aria-label="${label}">
  <line x1="20" y1="16" x2="300" y2="16" class="track" />
  ${ticks}
  <rect x="${x(low)}" y="10" width="${Math.max(2, x(high) - x(low))}" height="12" rx="3" class="band" />
  <circle cx="${x(summary.changed_rate)}" cy="16" r="5" class="dot" />
</svg>`
}

/** One figure of the summary: a number, what it counts, and a tone when it asks for attention. */
const tile = (value: number, label: string, tone: "warn" | "bad" | "good" | "" = "", id?: string) =>
  html`<li class="${`tile ${tone}`.trim()}"${id === undefined ? "" : html` id="${id}"`}>
  <span class="n">${integer.format(value)}</span><span class="l">${label}</span>
</li>`

/** Each side's duration percentiles (ms) and tokens, with the candidate's change. */
const sidesTable = (summary: EvaluationSummary) => {
  const row = (label: string, pick: (side: SideStats) => number, unit: string) => {
    const baseline = pick(summary.baseline)
    const candidate = pick(summary.candidate)
    return html`<tr>
    <th scope="row">${label}</th>
    <td>${integer.format(baseline)}${unit}</td>
    <td>${integer.format(candidate)}${unit}</td>
    <td class="delta">${relative(baseline, candidate)}</td>
  </tr>`
  }
  return html`<table class="sides">
  <thead>
    <tr><th></th><th scope="col">Baseline</th><th scope="col">Candidate</th><th scope="col">Change</th></tr>
  </thead>
  <tbody>
  ${row("Duration p50", (side) => side.duration_ms.p50, " ms")}
  ${row("Duration p95", (side) => side.duration_ms.p95, " ms")}
  ${row("Input tokens", (side) => side.input_tokens, "")}
  ${row("Output tokens", (side) => side.output_tokens, "")}
  </tbody>
</table>`
}

/** The headline and the figures a reader (and the CI gate of issue 41 item 4) decides on. */
const summarySection = (summary: EvaluationSummary) => {
  const [low, high] = summary.interval
  const verdicts = summary.verdicts
  const worse = absent(verdicts)
    ? ""
    : html`, or when any turn is judged worse (<b>${integer.format(verdicts.worse)}</b> here)`
  const judged = absent(verdicts)
    ? html`<li class="tile muted"><span class="n">\u2013</span><span class="l">not judged</span></li>`
    : [
        tile(verdicts.better, "judged better", "good"),
        tile(verdicts.same, "judged the same"),
        tile(verdicts.worse, "judged worse", verdicts.worse > 0 ? "bad" : "", "worse")
      ]
  return html`<section class="summary" aria-labelledby="headline">
  <div class="headline-row">
    <div>
      <p class="headline" id="headline">
        Changed <b>${integer.format(summary.changed)}</b> of <b>${integer.format(summary.turns)}</b> turns
      </p>
      <p class="rate" id="interval">
        <b>${percent(summary.changed_rate)}</b> changed · 95% interval <b>${percent(low)}\u2013${percent(high)}</b>
      </p>
      <p class="gate" id="gate">
        A CI gate (<code>parley eval run --max-changed-rate R</code>) fails when R is below the upper end,
        <b>${percent(high)}</b>${worse}.
      </p>
    </div>
    ${intervalGauge(summary)}
  </div>
  <div class="figures">
    <ul class="tiles">
      ${tile(summary.text_changed, "reply text changed")}
      ${tile(summary.path_changed, "node path changed")}
      ${tile(summary.tools_changed, "tool calls changed")}
      ${tile(summary.unrecorded_tool_calls, "unrecorded tool calls", summary.unrecorded_tool_calls > 0 ? "warn" : "")}
      ${tile(summary.baseline_unstable, "baseline unstable (model noise)", summary.baseline_unstable > 0 ? "warn" : "")}
      ${judged}
    </ul>
    ${sidesTable(summary)}
  </div>
</section>`
}

/** What the page says in place of the summary: how far the evaluation got, and whether a summary is to come. */
const progressSection = (evaluation: Evaluation) => {
  const pending = evaluation.status === "queued" || evaluation.status === "running"
  const done = `${integer.format(evaluation.turns_done)} of ${integer.format(evaluation.turns_total)} turns answered.`
  return html`<section class="summary" aria-labelledby="headline">
  <p class="headline" id="headline">Evaluation ${evaluation.status}</p>
  <p class="rate" id="progress">
    ${done} ${pending ? "The summary and the chart appear once it completes." : "It has no summary."}
  </p>
</section>`
}

/** The most nodes the chart draws a bar for; the rest share one bar. */
const MAX_CHART_NODES = 20

/** A node id cut for a chart label (the full id is in the bar's tooltip). */
const chartLabel = (nodeId: string) => (nodeId.length <= 26 ? nodeId : `${nodeId.slice(0, 25)}\u2026`)

/** One bar of the chart: a starting node, its changed turns and all its turns. */
interface Bar {
  readonly node: string
  readonly changed: number
  readonly total: number
}

/**
 * The bars of the chart, most changed first (then by node id), at most
 * {@link MAX_CHART_NODES}, the last one then summing the rest. `total` is the
 * node's turns when `turns` holds every turn, else its changed ones.
 */
const barsOf = (summary: EvaluationSummary, turns: ReadonlyArray<EvaluationTurn>, complete: boolean) => {
  const totals = new Map<string, number>()
  for (const turn of turns) totals.set(turn.node_id, (totals.get(turn.node_id) ?? 0) + 1)
  const sorted: Array<Bar> = Object.entries(summary.by_node)
    .filter(([, changed]) => changed > 0)
    .map(([node, changed]) => ({ node, changed, total: complete ? Math.max(changed, totals.get(node) ?? 0) : changed }))
    .sort((a, b) => b.changed - a.changed || (a.node < b.node ? -1 : a.node > b.node ? 1 : 0))
  if (sorted.length <= MAX_CHART_NODES) return sorted
  const rest = sorted.slice(MAX_CHART_NODES - 1)
  const others: Bar = {
    node: `${rest.length} other nodes`,
    changed: rest.reduce((sum, bar) => sum + bar.changed, 0),
    total: rest.reduce((sum, bar) => sum + bar.total, 0)
  }
  return [...sorted.slice(0, MAX_CHART_NODES - 1), others]
}

/**
 * A horizontal bar chart (inline SVG, 1200 units wide, scaled to the page) of
 * changed turns per starting node (`by_node`, A16); when `turns` holds every
 * turn of the evaluation, each bar sits on a lighter one for all the node's
 * turns.
 */
const chartSection = (summary: EvaluationSummary, turns: ReadonlyArray<EvaluationTurn>) => {
  const complete = turns.length === summary.turns
  const bars = barsOf(summary, turns, complete)
  const title = html`<h2 id="chart-title">Changed turns per starting node</h2>`
  if (bars.length === 0) return html`<section class="chart">${title}<p class="empty">No turn changed.</p></section>`
  const LABEL = 230
  const AREA = 860
  const ROW = 30
  const top = complete ? 30 : 4
  const scale = Math.max(...bars.map((bar) => bar.total))
  const width = (count: number) => Math.max(count > 0 ? 3 : 0, (count / scale) * AREA)
  const legend =
    complete &&
    html`<rect x="${LABEL}" y="4" width="14" height="14" class="all" />
  <text x="${LABEL + 20}" y="16">all turns at the node</text>
  <rect x="${LABEL + 180}" y="4" width="14" height="14" class="changed" />
  <text x="${LABEL + 200}" y="16">changed</text>`
  const rows = bars.map((bar, index) => {
    const y = top + index * ROW
    const of = complete ? `${bar.changed} of ${bar.total}` : String(bar.changed)
    return html`<g class="bar" data-node="${bar.node}" data-changed="${bar.changed}">
    <title>${`${bar.node}: ${of} turns changed`}</title>
    <text x="${LABEL - 10}" y="${y + 17}" text-anchor="end" class="label">${chartLabel(bar.node)}</text>
    ${complete && html`<rect x="${LABEL}" y="${y + 3}" width="${width(bar.total)}" height="20" rx="3" class="all" />`}
    <rect x="${LABEL}" y="${y + 3}" width="${width(bar.changed)}" height="20" rx="3" class="changed" />
    <text x="${LABEL + width(bar.total) + 8}" y="${y + 17}" class="count">${of}</text>
  </g>`
  })
  return html`<section class="chart">${title}
<svg id="chart" viewBox="0 0 1200 ${top + bars.length * ROW + 4}" width="100%" role="img" aria-labelledby="chart-title">
  ${legend}
  ${rows}
</svg>
</section>`
}

/** The text of an answer, its changed words marked `kind` when `segments` are given (whitespace kept). */
const replyText = (text: string, segments: ReadonlyArray<Segment> | undefined, kind: "del" | "ins") => {
  if (text === "") return html`<p class="text empty">(no reply text)</p>`
  const marked = segments?.map((segment) =>
    segment.changed ? html`<mark class="${kind}">${segment.text}</mark>` : segment.text
  )
  return html`<p class="text">${marked ?? text}</p>`
}

/** A node path as chips joined by arrows; chips that differ from `other` at the same place are marked. */
const nodePath = (nodes: ReadonlyArray<string>, other: ReadonlyArray<string> | undefined) => {
  if (nodes.length === 0) return html`<p class="path empty">(no node)</p>`
  const chips = nodes.map((node, index) => {
    const differs = other !== undefined && other[index] !== node
    const arrow = index > 0 && html`<span class="arrow">\u2192</span>`
    return html`${arrow}<code class="${differs ? "node differs" : "node"}">${node}</code>`
  })
  return html`<p class="path">${chips}</p>`
}

/** The most characters of a tool call's arguments or result shown. */
const MAX_JSON_SHOWN = 400

/** One tool call as compact JSON: `tool_id {arguments}`, then `-> result` or the error. */
const toolCall = (call: ToolCall, differs: boolean) => {
  const error = typeof call.error === "string" ? call.error : json(call.error)
  const outcome = absent(call.error)
    ? html`<code>${cut(json(call.result), MAX_JSON_SHOWN)}</code>`
    : html`<code class="error">${cut(error, MAX_JSON_SHOWN)}</code>`
  const truncated = call.truncated === true && html` <span class="note">(stored cut at 64 KiB)</span>`
  return html`<li class="${differs ? "call differs" : "call"}">
  <code class="tool">${call.tool_id}</code> <code>${cut(json(call.arguments), MAX_JSON_SHOWN)}</code><br />
  <span class="arrow">\u2192</span> ${outcome}${truncated}
</li>`
}

/** Tool calls in order, those `differs` flags marked. */
const toolCalls = (calls: ReadonlyArray<ToolCall>, differs: ReadonlyArray<boolean> | undefined) =>
  calls.length === 0
    ? html`<p class="tools empty">(no tool call)</p>`
    : html`<ol class="tools">${calls.map((call, index) => toolCall(call, differs?.[index] === true))}</ol>`

/** What to mark in a column: the changed words, and the other side's path and which calls have no match there. */
interface Marks {
  readonly kind: "del" | "ins"
  readonly segments?: ReadonlyArray<Segment> | undefined
  readonly otherNodes?: ReadonlyArray<string> | undefined
  readonly callsDiffer?: ReadonlyArray<boolean> | undefined
}

/** An answer's text, node path and tool calls, marked as `marks` say. */
const answerBody = (answer: TurnAnswer, marks: Marks) => [
  replyText(answer.text, marks.segments, marks.kind),
  nodePath(answer.nodes, marks.otherNodes),
  toolCalls(answer.tool_calls, marks.callsDiffer)
]

/** One column of a turn: its first answer marked, further repeats (A16 `repeats`) folded below it. */
const answerColumn = (title: string, answers: ReadonlyArray<TurnAnswer>, marks: Marks) => {
  const [first, ...more] = answers
  const repeats =
    more.length > 0 &&
    html`<details class="repeats">
    <summary>${more.length} more ${more.length === 1 ? "repeat" : "repeats"}</summary>
    ${more.map(
      (repeat, index) =>
        html`<div class="repeat"><h5>Repeat ${index + 2}</h5>${answerBody(repeat, { kind: marks.kind })}</div>`
    )}
  </details>`
  return html`<div class="col">
  <h4>${title}</h4>
  ${first === undefined ? html`<p class="empty">(no answer)</p>` : answerBody(first, marks)}
  ${repeats}
</div>`
}

/** A verdict badge (A17), or nothing for an unjudged turn. */
const verdictBadge = (verdict: Verdict | null | undefined) =>
  absent(verdict) ? "" : html`<span class="verdict ${verdict}">${verdict}</span>`

/** A changed turn: what changed, similarity and verdict above recorded | baseline | candidate. */
const changedTurn = (turn: EvaluationTurn) => {
  const baseline = turn.baseline[0]
  const candidate = turn.candidate[0]
  const diff =
    turn.text_changed && baseline !== undefined && candidate !== undefined
      ? wordDiff(baseline.text, candidate.text)
      : undefined
  const callsDiffer = (own: TurnAnswer | undefined, other: TurnAnswer | undefined) =>
    turn.tools_changed && own !== undefined ? unmatchedCalls(own.tool_calls, other?.tool_calls ?? []) : undefined
  const flags = [
    turn.text_changed && html`<span class="flag">reply text</span>`,
    turn.path_changed && html`<span class="flag">node path</span>`,
    turn.tools_changed && html`<span class="flag">tool calls</span>`
  ]
  return html`<article class="turn" id="${`turn-${turn.id}`}">
  <header>
    <h3>At node <code>${turn.node_id}</code></h3>
    ${flags}
    <span class="similarity" title="Jaccard index of the word sets of the first baseline and candidate replies">
      similarity ${turn.similarity.toFixed(2)}
    </span>
    ${verdictBadge(turn.verdict)}
    ${turn.should_close && html`<span class="flag close">would close the session</span>`}
    <span class="ids">session <code>${turn.session_id}</code> · run <code>${turn.run_id}</code></span>
  </header>
  <div class="cols">
    ${answerColumn("Recorded", [turn.recorded], { kind: "del" })}
    ${answerColumn("Baseline", turn.baseline, {
      kind: "del",
      segments: diff?.before,
      otherNodes: turn.path_changed ? candidate?.nodes : undefined,
      callsDiffer: callsDiffer(baseline, candidate)
    })}
    ${answerColumn("Candidate", turn.candidate, {
      kind: "ins",
      segments: diff?.after,
      otherNodes: turn.path_changed ? baseline?.nodes : undefined,
      callsDiffer: callsDiffer(candidate, baseline)
    })}
  </div>
</article>`
}

/** Whether a turn changed (A16): its candidate's text, node path or tool calls differ from the baseline's. */
const isChanged = (turn: EvaluationTurn) => turn.text_changed || turn.path_changed || turn.tools_changed

/** The order changed turns are shown in: worse verdicts first, then unjudged, same, better. */
const VERDICT_RANK: Readonly<Record<Verdict | "none", number>> = { worse: 0, none: 1, same: 2, better: 3 }

/** The unchanged turns, folded: a line each with the candidate's reply cut short. */
const unchangedTurns = (unchanged: ReadonlyArray<EvaluationTurn>) => {
  const rows = unchanged.map(
    (turn) => html`<tr>
      <td><code>${turn.node_id}</code></td><td><code>${turn.session_id}</code></td><td><code>${turn.run_id}</code></td>
      <td>${turn.similarity.toFixed(2)}</td><td>${cut(turn.candidate[0]?.text ?? "", 160)}</td>
    </tr>`
  )
  return html`<details class="unchanged" id="unchanged">
  <summary>${integer.format(unchanged.length)} unchanged ${unchanged.length === 1 ? "turn" : "turns"}</summary>
  <table>
    <thead>
      <tr>
        <th scope="col">Node</th><th scope="col">Session</th><th scope="col">Run</th>
        <th scope="col">Similarity</th><th scope="col">Candidate reply</th>
      </tr>
    </thead>
    <tbody>${rows}</tbody>
  </table>
</details>`
}

/** The changed turns, worst first (by verdict, then least similar), then the unchanged ones counted and folded. */
const turnsSection = (turns: ReadonlyArray<EvaluationTurn>) => {
  const changed = turns
    .filter(isChanged)
    .sort(
      (a, b) => VERDICT_RANK[a.verdict ?? "none"] - VERDICT_RANK[b.verdict ?? "none"] || a.similarity - b.similarity
    )
  const unchanged = turns.filter((turn) => !isChanged(turn))
  return html`<section class="turns">
  <h2 id="changed-turns">Changed turns (${integer.format(changed.length)})</h2>
  <p class="legend">
    Recorded is what the run said; baseline and candidate answered the same history.
    <mark class="del">Words</mark> only the baseline said, <mark class="ins">words</mark> only the candidate said,
    <code class="node differs">nodes</code> and calls that differ are marked.
  </p>
  ${changed.length === 0 ? html`<p class="empty">No turn changed.</p>` : changed.map(changedTurn)}
  ${unchanged.length > 0 && unchangedTurns(unchanged)}
</section>`
}

// ---------------------------------------------------------------------------
// The page
// ---------------------------------------------------------------------------

/**
 * The page's Content Security Policy: no fetch of any kind, no script, inline
 * styles only. The page carries it in a `<meta>`; the endpoint should send it
 * as the `Content-Security-Policy` header too.
 */
export const REPORT_CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

const STYLE = new Html(`
:root {
  color-scheme: light;
  --ink: #1f2328; --soft: #59636e; --line: #d1d9e0; --panel: #f6f8fa; --accent: #0969da;
  --del: #ffebe9; --del-ink: #82071e; --ins: #dafbe1; --ins-ink: #116329;
  --warn: #9a6700; --warn-bg: #fff8c5; --bad: #cf222e; --good: #1a7f37;
  --changed: #fb8f44; --changed-bg: #fff1e5; --changed-ink: #953800;
}
* { box-sizing: border-box; }
body {
  margin: 0; color: var(--ink); background: #fff;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
main { max-width: 1240px; margin: 0 auto; padding: 18px 24px 48px; }
code, .text, .tools { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace; }
code { font-size: 12.5px; overflow-wrap: anywhere; }
h1 { font-size: 24px; margin: 2px 0 4px; }
h1 .against { color: var(--soft); font-weight: 400; }
h2 { font-size: 19px; margin: 28px 0 10px; }
.eyebrow, .meta { margin: 0; color: var(--soft); font-size: 13px; }
.status {
  display: inline-block; padding: 0 8px; margin-right: 4px; border-radius: 10px;
  background: var(--panel); border: 1px solid var(--line); color: var(--ink); font-weight: 600;
}
.status.completed { background: var(--ins); border-color: #aceebb; color: var(--ins-ink); }
.status.running, .status.queued { background: #ddf4ff; border-color: #b6e3ff; color: #0550ae; }
.status.failed { background: var(--del); border-color: #ffcecb; color: var(--del-ink); }
.summary {
  margin-top: 14px; padding: 16px 20px; border: 1px solid var(--line); border-radius: 10px; background: var(--panel);
}
.headline-row { display: flex; justify-content: space-between; align-items: center; gap: 24px; flex-wrap: wrap; }
.headline-row > div { flex: 1 1 560px; min-width: 0; }
.gauge { flex: none; }
.headline { font-size: 34px; font-weight: 700; margin: 0; letter-spacing: -0.01em; }
.rate { font-size: 19px; margin: 2px 0 0; }
.gate { font-size: 13px; color: var(--soft); margin: 6px 0 0; }
.gauge .track { stroke: var(--line); stroke-width: 4; }
.gauge .tick { stroke: #afb8c1; }
.gauge text { font-size: 11px; fill: var(--soft); }
.gauge .band { fill: #54aeff; opacity: 0.55; }
.gauge .dot { fill: var(--accent); stroke: #fff; stroke-width: 2; }
.figures { display: flex; gap: 20px; margin-top: 14px; align-items: flex-start; flex-wrap: wrap; }
.tiles { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(4, 150px); gap: 8px; }
.tile { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px; }
.tile .n { display: block; font-size: 22px; font-weight: 700; }
.tile .l { display: block; font-size: 12.5px; color: var(--soft); line-height: 1.25; }
.tile.warn { background: var(--warn-bg); border-color: #eac54f; }
.tile.warn .n { color: var(--warn); }
.tile.bad { background: var(--del); border-color: #ff8182; }
.tile.bad .n { color: var(--bad); }
.tile.good .n { color: var(--good); }
.tile.muted .n { color: var(--soft); }
.sides { border-collapse: collapse; background: #fff; border: 1px solid var(--line); font-size: 13.5px; }
.sides th, .sides td { padding: 4px 12px; text-align: right; border-bottom: 1px solid var(--line); }
.sides th[scope=row] { text-align: left; font-weight: 500; color: var(--soft); }
.sides tr:last-child th, .sides tr:last-child td { border-bottom: 0; }
.sides .delta { color: var(--soft); }
.chart svg { display: block; max-width: 1200px; }
.chart text { font-size: 14px; fill: var(--ink); }
.chart .label { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
.chart .count { fill: var(--soft); }
.chart rect.all { fill: #d8dee4; }
.chart rect.changed { fill: var(--changed); }
.legend { color: var(--soft); font-size: 13px; margin: -4px 0 12px; }
mark.del { background: var(--del); color: var(--del-ink); text-decoration: line-through; }
mark.ins { background: var(--ins); color: var(--ins-ink); }
.turn { border: 1px solid var(--line); border-radius: 10px; margin: 0 0 16px; overflow: hidden; }
.turn > header {
  display: flex; flex-wrap: wrap; align-items: center; gap: 8px; padding: 8px 14px;
  background: var(--panel); border-bottom: 1px solid var(--line);
}
.turn h3 { font-size: 15px; margin: 0 6px 0 0; }
.flag {
  font-size: 12px; padding: 1px 8px; border-radius: 10px;
  background: var(--changed-bg); color: var(--changed-ink); border: 1px solid #ffd8b5;
}
.flag.close { background: #fff; color: var(--soft); border-color: var(--line); }
.similarity { font-size: 12.5px; color: var(--soft); }
.verdict {
  font-size: 12px; font-weight: 700; text-transform: uppercase; letter-spacing: 0.04em;
  padding: 1px 9px; border-radius: 10px; color: #fff;
}
.verdict.better { background: var(--good); }
.verdict.same { background: #6e7781; }
.verdict.worse { background: var(--bad); }
.ids { margin-left: auto; font-size: 12px; color: var(--soft); }
.cols { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); }
.col { padding: 10px 14px; border-right: 1px solid var(--line); min-width: 0; }
.col:last-child { border-right: 0; }
.col:first-child { background: #fbfcfd; }
h4 { margin: 0 0 6px; font-size: 12px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--soft); }
h5 { margin: 8px 0 4px; font-size: 12px; color: var(--soft); }
.text { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; margin: 0 0 8px; }
.path { margin: 0 0 6px; line-height: 1.9; }
.node { background: #ddf4ff; color: #0550ae; padding: 1px 6px; border-radius: 4px; }
.node.differs { background: var(--changed-bg); color: var(--changed-ink); outline: 1px solid var(--changed); }
.arrow { color: var(--soft); margin: 0 3px; }
.tools { margin: 0; padding-left: 20px; font-size: 12.5px; }
.call { margin-bottom: 4px; overflow-wrap: anywhere; }
.call.differs { background: var(--changed-bg); outline: 1px solid var(--changed); border-radius: 3px; }
.error { color: var(--bad); }
.note { color: var(--soft); font-size: 12px; font-family: system-ui, sans-serif; }
.empty { color: var(--soft); font-style: italic; font-family: system-ui, sans-serif; font-size: 13px; margin: 0 0 6px; }
details summary { cursor: pointer; color: var(--accent); }
.repeats { margin-top: 8px; font-size: 13px; }
.unchanged { margin-top: 8px; }
.unchanged table { border-collapse: collapse; width: 100%; margin-top: 8px; font-size: 13px; }
.unchanged th, .unchanged td {
  text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top;
}
`)

/**
 * The evaluation report (issue 41 item 5; A16, A17) as one HTML document: the
 * summary (or the progress, before completion), a chart of changed turns per
 * starting node, the changed turns side by side and the unchanged ones
 * counted. Self-contained: no request leaves the page (see the module docs);
 * every value of `input` is escaped. `turns` should hold every turn of the
 * evaluation (the chart then shows each node's turns beside its changed
 * ones), or at least every changed one. Pure and synchronous.
 */
export const renderReport = (input: ReportInput): string => {
  const { evaluation, turns } = input
  const summary = evaluation.summary
  const sides = `${sideName(evaluation.candidate)} against ${sideName(evaluation.baseline)}`
  const overview = absent(summary)
    ? progressSection(evaluation)
    : [summarySection(summary), chartSection(summary, turns)]
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8" />
<meta http-equiv="Content-Security-Policy" content="${REPORT_CONTENT_SECURITY_POLICY}" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<title>Evaluation ${evaluation.id}: ${sides}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${heading(evaluation)}
${overview}
${turnsSection(turns)}
</main>
</body>
</html>
`.markup
}
