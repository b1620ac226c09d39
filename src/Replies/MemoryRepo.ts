/**
 * An in-memory replies repository (`RepliesRepo.layerTest`, issue 13 item 8)
 * for fast tests of the `Replies` service with no database: sessions, reply
 * jobs and schedules in a {@link MemoryStore} the test creates and reads. It
 * keeps what the service relies on (D7 through `Rules.replyRefusal`, R1's
 * trailing debounce, D15's schedules); the worker's claims and leases are not
 * in memory and die when called (the worker runs over PostgreSQL).
 */
import { Clock, Effect } from "effect"
import type { JsonObject } from "../Domain/Common.ts"
import { makeIdGenerator } from "../Shared/Ids.ts"
import type { NewJob, RepliesRepo } from "./Repo.ts"
import { replyRefusal } from "./Rules.ts"

/** A session as the replies domain sees it. */
export interface MemorySession {
  readonly id: string
  readonly organization_id: string
  status: "open" | "closed"
  agent_id: string | null
  agent_type: "ai" | "human" | null
  thread_id: string | null
}

/** A pending reply job (R1: at most one per session). */
export interface MemoryJob {
  readonly id: string
  readonly organization_id: string
  readonly session_id: string
  due_at: Date
  starting_node_id: string | null
  metadata: JsonObject
  /** Triggers folded into this job (1 for a new one). */
  triggers: number
  /** Whether any of its triggers asked to NOTIFY the workers. */
  notified: boolean
}

/** A schedule (D15) as stored. */
export interface MemorySchedule {
  readonly id: string
  readonly organization_id: string
  readonly session_id: string
  readonly scheduled_for: Date
  readonly config: JsonObject
  status: "pending" | "running" | "done" | "failed" | "canceled"
  /** Why it failed or was canceled (`Session closed` when its session closed, D15). */
  error: string | null
  readonly created_at: Date
}

/** What the in-memory repository holds; tests add sessions and read jobs and schedules. */
export interface MemoryStore {
  readonly sessions: Map<string, MemorySession>
  readonly jobs: Array<MemoryJob>
  readonly schedules: Array<MemorySchedule>
  /** The store's id generator: the ids its repositories make, and the `Ids` of test layers over it. */
  readonly newId: () => string
}

/** An empty store. */
export const makeMemoryStore = (): MemoryStore => ({
  sessions: new Map(),
  jobs: [],
  schedules: [],
  newId: makeIdGenerator()
})

/** The wire JSON of a schedule (D15), as the SQL repository builds it. */
const scheduleJson = (schedule: MemorySchedule) => ({
  id: schedule.id,
  session_id: schedule.session_id,
  organization_id: schedule.organization_id,
  scheduled_for: schedule.scheduled_for.toISOString(),
  config: schedule.config,
  status: schedule.status,
  error: schedule.error,
  created_at: schedule.created_at.toISOString(),
  executed_at: null
})

/**
 * A worker method, not in memory: dies when called. Typed `never` so it also
 * stands for the claims, which answer SQL statements.
 */
const notInMemory = (method: string): never =>
  Effect.die(new Error(`RepliesRepo.layerTest has no ${method}: the replies worker runs over PostgreSQL`)) as never

/** The repository over `store` (see module docs). */
export const makeMemoryRepo = (store: MemoryStore): RepliesRepo["Service"] => {
  const sessionOf = (organizationId: string, sessionId: string) => {
    const session = store.sessions.get(sessionId)
    return session?.organization_id === organizationId ? session : undefined
  }

  /** R1: creates the session's pending job, or moves the pending one to the new due time. */
  const upsertJob = (job: NewJob, sessionId: string) => {
    const pending = store.jobs.find((candidate) => candidate.session_id === sessionId)
    if (pending === undefined) {
      store.jobs.push({
        id: store.newId(),
        organization_id: job.organizationId,
        session_id: sessionId,
        due_at: job.dueAt,
        starting_node_id: job.startingNodeId,
        metadata: job.metadata,
        triggers: 1,
        notified: job.notify
      })
      return
    }
    pending.due_at = job.dueAt
    pending.starting_node_id = job.startingNodeId ?? pending.starting_node_id
    pending.metadata = { ...pending.metadata, ...job.metadata }
    pending.triggers += 1
    pending.notified ||= job.notify
  }

  const scheduleOf = (sessionId: string, scheduleId: string) =>
    store.schedules.find((schedule) => schedule.id === scheduleId && schedule.session_id === sessionId)

  return {
    withTransaction: (effect) => effect,
    sessionState: (organizationId, sessionId) =>
      Effect.sync(() => {
        const session = sessionOf(organizationId, sessionId)
        return session === undefined ? undefined : { id: session.id, status: session.status }
      }),
    enqueue: (job) => Effect.sync(() => upsertJob(job, job.sessionId)),
    reply: (job) =>
      Effect.sync(() => {
        const session = sessionOf(job.organizationId, job.sessionId)
        if (session === undefined) return undefined
        if (replyRefusal(session) === undefined) upsertJob(job, session.id)
        return { ...session, body: JSON.stringify(session) }
      }),
    insertSchedule: (schedule) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const stored: MemorySchedule = {
          id: store.newId(),
          organization_id: schedule.organizationId,
          session_id: schedule.sessionId,
          scheduled_for: new Date(schedule.scheduledFor),
          config: schedule.config,
          status: "pending",
          error: null,
          created_at: new Date(now)
        }
        store.schedules.push(stored)
        return JSON.stringify(scheduleJson(stored))
      }),
    listSchedules: (sessionId) =>
      Effect.sync(() =>
        JSON.stringify(store.schedules.filter((schedule) => schedule.session_id === sessionId).map(scheduleJson))
      ),
    scheduleStatus: (sessionId, scheduleId) => Effect.sync(() => scheduleOf(sessionId, scheduleId)?.status),
    cancelSchedule: (sessionId, scheduleId) =>
      Effect.sync(() => {
        const schedule = scheduleOf(sessionId, scheduleId)
        if (schedule?.status !== "pending") return false
        schedule.status = "canceled"
        return true
      }),
    claimJobs: () => notInMemory("claimJobs"),
    recoverJobs: () => notInMemory("recoverJobs"),
    completeJob: () => notInMemory("completeJob"),
    retryJob: () => notInMemory("retryJob"),
    releaseJobs: () => notInMemory("releaseJobs"),
    nextDue: Effect.suspend(() => notInMemory("nextDue")),
    claimSchedules: () => notInMemory("claimSchedules"),
    finishSchedule: () => notInMemory("finishSchedule"),
    retrySchedule: () => notInMemory("retrySchedule"),
    releaseSchedules: () => notInMemory("releaseSchedules")
  }
}
