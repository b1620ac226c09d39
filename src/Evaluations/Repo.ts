/**
 * SQL of the evaluations domain (DECISIONS.md A16, A17;
 * migrations/0024_evaluations.ts): the `evaluations` job rows and their
 * `evaluation_turns`.
 *
 * An evaluation is made in one transaction with its turns, one per run of
 * the assistant in each selected session (copied: what the run recorded and
 * where and when it started). The job is leased like reply jobs and erasures
 * (`src/Erasures/Repo.ts`): claimed with `FOR UPDATE SKIP LOCKED` under a
 * lease, and every answered turn is written by one statement that requires
 * the lease to be this worker's, the evaluation `running` and the turn not
 * answered yet: a turn is answered once, a cancelled evaluation takes no more
 * answers, and a crashed worker's evaluation goes on from its unanswered
 * turns once its lease expires. Wire JSON is built here from the schemas
 * (`Database/Json.ts` `membersOf`), for the endpoints and for the
 * `evaluation.completed` event alike.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { immutableIsoTimestamp, immutableObjectJson, membersOf, objectJson } from "../Database/Json.ts"
import { isUuid, type JsonObject } from "../Domain/Common.ts"
import {
  Evaluation,
  type EvaluationSide,
  type EvaluationSummary,
  EvaluationTurn,
  type TurnAnswer,
  type Verdict
} from "../Domain/Evaluation.ts"
import { historyText } from "../Messages/Repo.ts"
import { insertEvents, notifyDeliveriesIf, wroteSubscribedFragment } from "../Outbox/Outbox.ts"
import { Ids } from "../Shared/Ids.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"
import type { AnsweredTurn, SideCost } from "./Compare.ts"

/** The channel evaluation workers LISTEN on; a new evaluation notifies it at commit. */
export const evaluationsChannel = "parley_evaluations"

/** SQL text of an evaluation's wire JSON (the {@link Evaluation} schema) over the evaluations row `alias`. */
const evaluationJson = (alias: string) =>
  immutableObjectJson(membersOf(Evaluation, alias, { id: `${alias}.id::text` }, immutableIsoTimestamp))

/** SQL text of a turn's wire JSON (the {@link EvaluationTurn} schema) over the evaluation_turns row `t`. */
const turnJson = objectJson(
  membersOf(EvaluationTurn, "t", {
    id: "t.id::text",
    session_id: "t.session_id::text",
    run_id: "t.run_id::text"
  })
)

/** An evaluation claimed by a worker: what answering its turns needs. */
export interface ClaimedEvaluation {
  readonly organization_id: string
  readonly id: string
  readonly repeats: number
  readonly judge: { readonly instructions: string } | null
  readonly baseline_snapshot: JsonObject
  readonly candidate_snapshot: JsonObject
  readonly trace_context: string | null
}

/** A turn waiting for its answers. */
export interface PendingTurn {
  readonly id: string
  readonly session_id: string
  readonly node_id: string
  readonly started_at: Date
  readonly recorded: TurnAnswer
}

/** What the worker writes of an answered turn. */
export interface TurnResult {
  readonly should_close: boolean
  readonly baseline: ReadonlyArray<TurnAnswer>
  readonly candidate: ReadonlyArray<TurnAnswer>
  readonly text_changed: boolean
  readonly path_changed: boolean
  readonly tools_changed: boolean
  readonly changed: boolean
  readonly similarity: number
  readonly verdict: Verdict | null
  /** What the summary sums: costs per side, unrecorded calls, baseline stability. */
  readonly stats: {
    readonly baseline: SideCost
    readonly candidate: SideCost
    readonly unrecorded_tool_calls: number
    readonly baseline_unstable: boolean
  }
}

/** Which sessions' runs become turns: ids (in the order given) or a range of run starts, newest session first. */
export type TurnSource =
  | { readonly ids: ReadonlyArray<string> }
  | { readonly since: string; readonly until: string; readonly limit: number }

/** A new evaluation, its sides resolved. */
export interface NewEvaluation {
  readonly organizationId: string
  readonly assistantId: string
  readonly baseline: EvaluationSide
  readonly candidate: EvaluationSide
  readonly baselineCommitId: string | null
  readonly candidateCommitId: string | null
  readonly baselineSnapshot: unknown
  readonly candidateSnapshot: unknown
  readonly repeats: number
  readonly judge: { readonly instructions: string } | null
  readonly source: TurnSource
}

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const { newId } = yield* Ids

  const parse = <A>(rows: ReadonlyArray<{ readonly json: string }>): A | undefined =>
    rows[0] === undefined ? undefined : (JSON.parse(rows[0].json) as A)

  /** The session ids of `ids` that are not sessions of the organization one can read (unknown, erased). */
  const unknownSessions = (organizationId: string, ids: ReadonlyArray<string>) => {
    const uuids = ids.filter(isUuid)
    if (uuids.length === 0) return Effect.succeed(ids)
    return sql<{ id: string }>`SELECT s.id::text AS id FROM sessions s
      WHERE s.id = ANY(${uuids}::uuid[]) AND s.organization_id = ${organizationId} AND s.erasure_id IS NULL`.pipe(
      Effect.map((rows) => {
        const known = new Set(rows.map((row) => row.id))
        return ids.filter((id) => !known.has(id.toLowerCase()))
      })
    )
  }

  /** The selected sessions, `session_id` and `rank` (their order), as a CTE body. */
  const picked = (organizationId: string, assistantId: string, source: TurnSource) =>
    "ids" in source
      ? sql`SELECT s.id AS session_id, u.rank FROM unnest(${source.ids}::uuid[]) WITH ORDINALITY AS u(id, rank)
          JOIN sessions s ON s.id = u.id AND s.organization_id = ${organizationId} AND s.erasure_id IS NULL`
      : sql`SELECT q.session_id, row_number() OVER (ORDER BY q.last DESC, q.session_id) AS rank FROM (
            SELECT r.session_id, max(r.started_at) AS last FROM runs r
            JOIN sessions s ON s.organization_id = r.organization_id AND s.id = r.session_id AND s.erasure_id IS NULL
            WHERE r.organization_id = ${organizationId} AND r.assistant_id = ${assistantId}
              AND r.started_at >= ${source.since}::timestamptz AND r.started_at < ${source.until}::timestamptz
            GROUP BY r.session_id ORDER BY last DESC, r.session_id LIMIT ${source.limit}) q`

  /**
   * Makes the evaluation (`queued`) with its turns, in one transaction, and
   * notifies the workers at commit; returns its wire JSON.
   */
  const insert = (evaluation: NewEvaluation) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const id = newId()
        const traceContext = yield* currentTraceContext
        yield* sql`INSERT INTO evaluations (organization_id, id, assistant_id, status, baseline, candidate,
            baseline_commit_id, candidate_commit_id, baseline_snapshot, candidate_snapshot, repeats, judge,
            turns_total, trace_context, created_at)
          VALUES (${evaluation.organizationId}, ${id}, ${evaluation.assistantId}, 'queued',
            ${sql.json(evaluation.baseline)}, ${sql.json(evaluation.candidate)}, ${evaluation.baselineCommitId},
            ${evaluation.candidateCommitId}, ${sql.json(evaluation.baselineSnapshot)},
            ${sql.json(evaluation.candidateSnapshot)}, ${evaluation.repeats},
            ${evaluation.judge === null ? null : sql.json(evaluation.judge)}, 0, ${traceContext}::jsonb,
            statement_timestamp())`
        yield* sql`WITH p AS (${picked(evaluation.organizationId, evaluation.assistantId, evaluation.source)}),
          t AS (
            INSERT INTO evaluation_turns (organization_id, evaluation_id, id, position, session_id, run_id, node_id,
              started_at, recorded)
            SELECT ${evaluation.organizationId}, ${id}, parley_uuid_v7(),
              row_number() OVER (ORDER BY p.rank, r.started_at, r.id), r.session_id, r.id,
              coalesce(r.nodes->>0, ''), r.started_at,
              jsonb_build_object('text', coalesce((
                SELECT ${sql.literal(historyText("m"))} FROM messages m
                WHERE m.organization_id = r.organization_id AND m.session_id = r.session_id AND m.run_id = r.id::text
                  AND coalesce(m.redacted_type, m.content->>'type') = 'text'
                ORDER BY m.created_at DESC, m.id DESC LIMIT 1), ''),
                'nodes', r.nodes, 'tool_calls', r.tool_calls, 'error', r.error)
            FROM p JOIN runs r ON r.organization_id = ${evaluation.organizationId} AND r.session_id = p.session_id
              AND r.assistant_id = ${evaluation.assistantId}
            RETURNING 1
          )
          UPDATE evaluations SET turns_total = (SELECT count(*) FROM t)
          WHERE organization_id = ${evaluation.organizationId} AND id = ${id}`
        yield* sql`SELECT pg_notify(${evaluationsChannel}, '')`
        return (yield* find(evaluation.organizationId, evaluation.assistantId, id))!
      })
    )

  /** The evaluation of the organization's assistant, or undefined. */
  const find = (organizationId: string, assistantId: string, evaluationId: string) =>
    isUuid(evaluationId)
      ? sql<{ json: string }>`SELECT ${sql.literal(evaluationJson("e"))}::text AS json FROM evaluations e
          WHERE e.organization_id = ${organizationId} AND e.id = ${evaluationId}
            AND e.assistant_id = ${assistantId}`.pipe(Effect.map(parse<Evaluation>))
      : Effect.succeed(undefined)

  /** The assistant's evaluations, newest first, `limit` of them after `afterId`. */
  const list = (organizationId: string, assistantId: string, page: { limit: number; afterId?: string | undefined }) =>
    sql<{ json: string }>`SELECT ${sql.literal(evaluationJson("e"))}::text AS json FROM evaluations e
      WHERE e.organization_id = ${organizationId} AND e.assistant_id = ${assistantId}
      ${
        page.afterId === undefined
          ? sql``
          : isUuid(page.afterId)
            ? sql`AND (e.created_at, e.id) < (SELECT a.created_at, a.id FROM evaluations a
                WHERE a.organization_id = ${organizationId} AND a.id = ${page.afterId})`
            : sql`AND false`
      }
      ORDER BY e.created_at DESC, e.id DESC LIMIT ${page.limit}`.pipe(
      Effect.map((rows) => rows.map((row) => JSON.parse(row.json) as Evaluation))
    )

  /** Cancels a queued or running evaluation; its wire JSON, or undefined when it was not (unknown or finished). */
  const cancel = (organizationId: string, assistantId: string, evaluationId: string) =>
    isUuid(evaluationId)
      ? sql<{ json: string }>`UPDATE evaluations e SET status = 'cancelled', completed_at = statement_timestamp(),
            leased_by = NULL, lease_until = NULL
          WHERE e.organization_id = ${organizationId} AND e.id = ${evaluationId} AND e.assistant_id = ${assistantId}
            AND e.status IN ('queued', 'running')
          RETURNING ${sql.literal(evaluationJson("e"))}::text AS json`.pipe(Effect.map(parse<Evaluation>))
      : Effect.succeed(undefined)

  /** Answered turns of an evaluation by position, after the turn `afterId`, `changed` ones only when given. */
  const turns = (
    organizationId: string,
    evaluationId: string,
    query: { readonly changed?: boolean | undefined; readonly limit: number; readonly afterId?: string | undefined }
  ) =>
    sql<{ json: string }>`SELECT ${sql.literal(turnJson)}::text AS json FROM evaluation_turns t
      WHERE t.organization_id = ${organizationId} AND t.evaluation_id = ${evaluationId}
        AND t.answered_at IS NOT NULL
        ${query.changed === undefined ? sql`` : sql`AND t.changed = ${query.changed}`}
        ${
          query.afterId === undefined
            ? sql``
            : isUuid(query.afterId)
              ? sql`AND t.position > (SELECT a.position FROM evaluation_turns a WHERE a.organization_id = ${organizationId}
                  AND a.evaluation_id = ${evaluationId} AND a.id = ${query.afterId})`
              : sql`AND false`
        }
      ORDER BY t.position LIMIT ${query.limit}`.pipe(
      Effect.map((rows) => rows.map((row) => JSON.parse(row.json) as EvaluationTurn))
    )

  /**
   * Up to `organizations` ids of organizations with a queued or running
   * evaluation whose lease is free or expired, those after `after` first in
   * id order, then the others (O11; `Database/Workers.ts`
   * `makeOrganizationRotation`). No row locks: on Citus one multi-shard SELECT.
   */
  const discover = (after: string, organizations: number) =>
    sql<{ organization_id: string }>`SELECT organization_id::text AS organization_id FROM evaluations
      WHERE status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until < statement_timestamp())
      GROUP BY organization_id
      ORDER BY organization_id <= ${after}::uuid, organization_id
      LIMIT ${organizations}`.pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  /**
   * Leases the queued or running evaluation of the organization made first
   * (free or expired lease) to `workerId`; none when there is none. One
   * organization per statement (O11): on Citus a router statement, where
   * `FOR UPDATE SKIP LOCKED` works; the lease concerns the evaluation's own
   * row, so claiming organization by organization keeps it. Returns at most
   * one evaluation.
   */
  const claim = (organizationId: string, workerId: string, leaseMs: number) =>
    sql<ClaimedEvaluation>`UPDATE evaluations e SET status = 'running', leased_by = ${workerId},
        lease_until = statement_timestamp() + ${leaseMs} * interval '1 millisecond'
      FROM (SELECT organization_id, id FROM evaluations
        WHERE organization_id = ${organizationId} AND status IN ('queued', 'running')
          AND (lease_until IS NULL OR lease_until < statement_timestamp())
        ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) c
      WHERE e.organization_id = ${organizationId} AND e.id = c.id
      RETURNING e.organization_id::text AS organization_id, e.id::text AS id, e.repeats, e.judge,
        e.baseline_snapshot, e.candidate_snapshot, e.trace_context::text AS trace_context`

  /** Up to `limit` unanswered turns of the evaluation, by position. */
  const pendingTurns = (evaluation: ClaimedEvaluation, limit: number) =>
    sql<PendingTurn>`SELECT t.id::text AS id, t.session_id::text AS session_id, t.node_id, t.started_at, t.recorded
      FROM evaluation_turns t
      WHERE t.organization_id = ${evaluation.organization_id} AND t.evaluation_id = ${evaluation.id}
        AND t.answered_at IS NULL
      ORDER BY t.position LIMIT ${limit}`

  /**
   * Writes a turn's answers and renews the lease, when the lease is still
   * `workerId`'s, the evaluation running and the turn unanswered; false
   * otherwise (cancelled, lease lost: stop). Its commit does not wait for the
   * WAL flush (`synchronous_commit` off for this transaction): an answer lost
   * in a crash of the database server is answered again, and live commits do
   * not queue behind an evaluation's flushes (`npm run bench -- evaluations`,
   * live replies beside an evaluation).
   */
  const answer = (evaluation: ClaimedEvaluation, workerId: string, leaseMs: number, turnId: string, r: TurnResult) =>
    sql<{ held: boolean }>`WITH e AS (
        UPDATE evaluations SET turns_done = turns_done + 1,
          lease_until = statement_timestamp() + ${leaseMs} * interval '1 millisecond'
        FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
        WHERE organization_id = ${evaluation.organization_id} AND id = ${evaluation.id}
          AND leased_by = ${workerId} AND status = 'running'
          AND EXISTS (SELECT 1 FROM evaluation_turns WHERE organization_id = ${evaluation.organization_id}
            AND evaluation_id = ${evaluation.id} AND id = ${turnId} AND answered_at IS NULL)
        RETURNING 1
      ), t AS (
        UPDATE evaluation_turns SET answered_at = statement_timestamp(), should_close = ${r.should_close},
          baseline = ${sql.json(r.baseline)}, candidate = ${sql.json(r.candidate)},
          text_changed = ${r.text_changed}, path_changed = ${r.path_changed}, tools_changed = ${r.tools_changed},
          changed = ${r.changed}, similarity = ${r.similarity}, verdict = ${r.verdict}, stats = ${sql.json(r.stats)}
        WHERE organization_id = ${evaluation.organization_id} AND evaluation_id = ${evaluation.id}
          AND id = ${turnId} AND answered_at IS NULL AND EXISTS (SELECT 1 FROM e)
        RETURNING 1
      )
      SELECT EXISTS (SELECT 1 FROM t) AS held`.pipe(Effect.map((rows) => rows[0]?.held === true))

  /** What the summary reads of every answered turn of the evaluation. */
  const answeredTurns = (evaluation: ClaimedEvaluation) =>
    sql<{
      node_id: string
      changed: boolean
      text_changed: boolean
      path_changed: boolean
      tools_changed: boolean
      verdict: Verdict | null
      stats: TurnResult["stats"]
    }>`SELECT t.node_id, t.changed, t.text_changed, t.path_changed, t.tools_changed, t.verdict, t.stats
      FROM evaluation_turns t
      WHERE t.organization_id = ${evaluation.organization_id} AND t.evaluation_id = ${evaluation.id}
        AND t.answered_at IS NOT NULL
      ORDER BY t.position`.pipe(
      Effect.map((rows) =>
        rows.map(
          (row): AnsweredTurn => ({
            node_id: row.node_id,
            changed: row.changed,
            text_changed: row.text_changed,
            path_changed: row.path_changed,
            tools_changed: row.tools_changed,
            verdict: row.verdict,
            baseline_unstable: row.stats.baseline_unstable,
            unrecorded_tool_calls: row.stats.unrecorded_tool_calls,
            baseline: row.stats.baseline,
            candidate: row.stats.candidate
          })
        )
      )
    )

  /**
   * Completes the evaluation with `summary` and writes its
   * `evaluation.completed` event (W1, A16: `data.object` is the evaluation),
   * when the lease is still `workerId`'s and it is running; false otherwise.
   */
  const complete = (evaluation: ClaimedEvaluation, workerId: string, summary: EvaluationSummary) =>
    sql<{ done: boolean; subscribed: boolean }>`WITH e AS (
        UPDATE evaluations SET status = 'completed', summary = ${sql.json(summary)},
          completed_at = statement_timestamp(), leased_by = NULL, lease_until = NULL
        WHERE organization_id = ${evaluation.organization_id} AND id = ${evaluation.id}
          AND leased_by = ${workerId} AND status = 'running'
        RETURNING *
      ), ev AS (
        ${sql.literal(
          insertEvents({
            // One id for the row and its envelope: a volatile expression here would run twice.
            id: "ev.id",
            type: "'evaluation.completed'",
            organizationId: "e.organization_id",
            conversationId: "NULL::uuid",
            at: "e.completed_at",
            object: evaluationJson("e"),
            traceContext: "e.trace_context",
            from: "e CROSS JOIN (SELECT parley_uuid_v7() AS id) ev"
          })
        )}
      )
      SELECT EXISTS (SELECT 1 FROM e) AS done, ${wroteSubscribedFragment(sql, ["ev"], evaluation.organization_id)} AS subscribed`.pipe(
      Effect.flatMap(([row]) =>
        Effect.as(notifyDeliveriesIf(sql, row?.subscribed === true, evaluation.organization_id), row?.done === true)
      )
    )

  /** Ends the evaluation `failed` with `error` when the lease is still `workerId`'s and it is running. */
  const fail = (evaluation: ClaimedEvaluation, workerId: string, error: string) =>
    sql`UPDATE evaluations SET status = 'failed', error = ${error}, completed_at = statement_timestamp(),
        leased_by = NULL, lease_until = NULL
      WHERE organization_id = ${evaluation.organization_id} AND id = ${evaluation.id}
        AND leased_by = ${workerId} AND status = 'running'`.pipe(Effect.asVoid)

  /** Gives back the leases `workerId` holds (O5): another worker takes them at once. */
  const release = (workerId: string) =>
    sql`UPDATE evaluations SET leased_by = NULL, lease_until = NULL
      WHERE leased_by = ${workerId} AND status = 'running'`.pipe(Effect.asVoid)

  return {
    unknownSessions,
    insert,
    find,
    list,
    cancel,
    turns,
    discover,
    claim,
    pendingTurns,
    answer,
    answeredTurns,
    complete,
    fail,
    release
  }
})

/** The evaluations repository (SQL only; see module docs). */
export class EvaluationsRepo extends Context.Service<EvaluationsRepo, Effect.Success<typeof makeRepo>>()(
  "parley/EvaluationsRepo"
) {
  /** Over PostgreSQL; requires `PgClient` and `Ids`. */
  static readonly layer = Layer.effect(EvaluationsRepo, makeRepo)
}
