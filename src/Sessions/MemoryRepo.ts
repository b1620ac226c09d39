/**
 * The sessions repository in memory (`SessionsRepo.layerTest`, issue 13 item
 * 8) over a {@link MemoryDatabase}: the same answers as the SQL of `Repo.ts`
 * for what the `Sessions` service's rules rely on (D1, D4-D8, D16, W1), so
 * those rules are tested without a database.
 *
 * It models the trigger `sessions_closed` of migration `0005_replies.ts`: a
 * session's status going from open to closed, through any path, cancels its
 * pending schedules (status `canceled`, error `Session closed`) and drops its
 * pending reply job (D15, R1).
 *
 * The contact, conversation and session writes are exported for the ingest
 * repository in memory, as `Repo.ts` exports its CTEs to ingest's statements.
 */
import {
  defaultSettings,
  type MemoryAgent,
  type MemoryConversation,
  type MemoryDatabase,
  type MemorySessionRow,
  memoryStatement,
  memoryTimestamp,
  memoryTransaction,
  recordEvent,
  uuidKey
} from "../Database/Memory.ts"
import type { Agent } from "../Domain/Agent.ts"
import type { JsonObject } from "../Domain/Common.ts"
import type { Session } from "../Domain/Session.ts"
import type { SessionsRepo } from "./Repo.ts"

/** The agent `agentId` of the database as the wire has it (spec "Agent"), or null. */
const agentObject = (db: MemoryDatabase, agentId: string | null): Agent | null => {
  const agent = agentId === null ? undefined : db.agents.get(agentId)
  if (agent === undefined) return null
  const created_at = memoryTimestamp(agent.created_at)
  return agent.type === "ai"
    ? {
        id: agent.id,
        name: agent.name,
        type: "ai",
        assistant_id: agent.assistant_id ?? "",
        organization_id: agent.organization_id,
        created_at
      }
    : {
        id: agent.id,
        name: agent.name,
        type: "human",
        profile_id: agent.profile_id ?? "",
        organization_id: agent.organization_id,
        created_at
      }
}

/** The Session of a row as the wire has it (`Database/Json.ts` `sessionJson`), members in the schema's order. */
const sessionObject = (db: MemoryDatabase, row: MemorySessionRow): Session => ({
  id: row.id,
  contact_id: row.contact_id,
  organization_id: row.organization_id,
  conversation_id: row.conversation_id,
  thread_id: row.thread_id,
  status: row.status,
  agent: agentObject(db, row.agent_id),
  metadata: structuredClone(row.metadata),
  ending_survey_submission_id: row.ending_survey_submission_id,
  created_at: memoryTimestamp(row.created_at),
  updated_at: row.updated_at === null ? null : memoryTimestamp(row.updated_at)
})

/** The Conversation of a row as conversation.created carries it (channel members null when none, D8). */
const conversationObject = (conversation: MemoryConversation): JsonObject => ({
  id: conversation.id,
  organization_id: conversation.organization_id,
  contact_id: conversation.contact_id,
  channel_type: conversation.channel_type === "" ? null : conversation.channel_type,
  channel_to: conversation.channel_to === "" ? null : conversation.channel_to,
  created_at: memoryTimestamp(conversation.created_at)
})

/** The agent `agentId` of the organization (D6): UUIDs in either case, as PostgreSQL reads them. */
export const agentOf = (db: MemoryDatabase, organizationId: string, agentId: string): MemoryAgent | undefined => {
  const agent = db.agents.get(uuidKey(agentId))
  return agent?.organization_id === organizationId ? agent : undefined
}

/** The session `sessionId` of the organization (D1). */
export const sessionOf = (
  db: MemoryDatabase,
  organizationId: string,
  sessionId: string
): MemorySessionRow | undefined => {
  const session = db.sessions.get(uuidKey(sessionId))
  return session?.organization_id === organizationId ? session : undefined
}

/**
 * The contact write of D8 (`upsertContactSql`): creates the contact, or sets
 * the name and phone given (null keeps) when they differ, stamping
 * `updated_at`; an unchanged contact is not written.
 */
export const upsertContact = (
  db: MemoryDatabase,
  contact: {
    readonly organizationId: string
    readonly contactId: string
    readonly name: string | null
    readonly phone: string | null
  },
  now: Date
): void => {
  const found = db.contacts.find(
    (row) => row.organization_id === contact.organizationId && row.contact_id === contact.contactId
  )
  if (found === undefined) {
    db.contacts.push({
      organization_id: contact.organizationId,
      contact_id: contact.contactId,
      name: contact.name,
      phone: contact.phone,
      created_at: now,
      updated_at: null
    })
    return
  }
  const name = contact.name ?? found.name
  const phone = contact.phone ?? found.phone
  if (name === found.name && phone === found.phone) return
  found.name = name
  found.phone = phone
  found.updated_at = now
}

/** The conversation of (organization, contact, channel) (D8), if it exists (`conversationCtes`' `c0`). */
const findConversation = (
  db: MemoryDatabase,
  key: {
    readonly organizationId: string
    readonly contactId: string
    readonly channelType: string
    readonly channelTo: string
  }
): MemoryConversation | undefined =>
  db.conversations.find(
    (row) =>
      row.organization_id === key.organizationId &&
      row.contact_id === key.contactId &&
      row.channel_type === key.channelType &&
      row.channel_to === key.channelTo
  )

/**
 * The conversation of (organization, contact, channel) (D8), created with id
 * `id` and its conversation.created event (W1) when missing
 * (`conversationCtes`). Answers it with whether it was created.
 */
export const conversationFor = (
  db: MemoryDatabase,
  key: {
    readonly id: string
    readonly organizationId: string
    readonly contactId: string
    readonly channelType: string
    readonly channelTo: string
  },
  now: Date
): { readonly conversation: MemoryConversation; readonly created: boolean } => {
  const found = findConversation(db, key)
  if (found !== undefined) return { conversation: found, created: false }
  const conversation: MemoryConversation = {
    id: key.id,
    organization_id: key.organizationId,
    contact_id: key.contactId,
    channel_type: key.channelType,
    channel_to: key.channelTo,
    created_at: now
  }
  db.conversations.push(conversation)
  recordEvent(db, {
    type: "conversation.created",
    organizationId: key.organizationId,
    object: conversationObject(conversation),
    now
  })
  return { conversation, created: true }
}

/**
 * A new session row with its session.created event carrying its agent (W1)
 * (`openSessionCtes`); `contactName` null takes the contact's name.
 */
export const insertSession = (
  db: MemoryDatabase,
  row: {
    readonly id: string
    readonly organizationId: string
    readonly conversationId: string
    readonly contactId: string
    readonly contactName: string | null
    readonly threadId: string | null
    readonly status: "open" | "closed"
    readonly agentId: string | null
    readonly metadata: JsonObject
  },
  now: Date
): MemorySessionRow => {
  const contactName =
    row.contactName ??
    db.contacts.find(
      (contact) => contact.organization_id === row.organizationId && contact.contact_id === row.contactId
    )?.name ??
    null
  const session: MemorySessionRow = {
    id: row.id,
    organization_id: row.organizationId,
    conversation_id: row.conversationId,
    contact_id: row.contactId,
    contact_name: contactName,
    thread_id: row.threadId,
    status: row.status,
    agent_id: row.agentId,
    agent_type: row.agentId === null ? null : (db.agents.get(row.agentId)?.type ?? null),
    metadata: structuredClone(row.metadata),
    ending_survey_submission_id: null,
    current_node_id: null,
    created_at: now,
    updated_at: null
  }
  db.sessions.set(session.id, session)
  recordEvent(db, {
    type: "session.created",
    organizationId: session.organization_id,
    object: sessionObject(db, session),
    now
  })
  return session
}

/** The trigger `sessions_closed` (migration 0005): the session's pending schedules are canceled, its pending job dropped. */
const sessionClosed = (db: MemoryDatabase, sessionId: string): void => {
  for (const schedule of db.schedules) {
    if (schedule.session_id === sessionId && schedule.status === "pending") {
      schedule.status = "canceled"
      schedule.error = "Session closed"
    }
  }
  // Jobs in memory are all pending (the worker's claims run over PostgreSQL).
  const kept = db.jobs.filter((job) => job.session_id !== sessionId)
  db.jobs.splice(0, db.jobs.length, ...kept)
}

/** D16: whether the session is open and idle at `now` past its organization's `session_idle_timeout_seconds`. */
const isIdleAt = (db: MemoryDatabase, session: MemorySessionRow, now: Date): boolean => {
  const timeout = (db.settings.get(session.organization_id) ?? defaultSettings()).session_idle_timeout_seconds
  if (timeout === null) return false
  const since = now.getTime() - timeout * 1000
  return (
    session.created_at.getTime() < since &&
    !db.messages.some((message) => message.session_id === session.id && message.created_at.getTime() >= since)
  )
}

/** PostgreSQL's `jsonb @>`: whether `value` contains `pattern` (D2's metadata filter). */
const contains = (value: unknown, pattern: unknown): boolean => {
  if (Array.isArray(pattern)) {
    return Array.isArray(value) && pattern.every((item) => value.some((candidate) => contains(candidate, item)))
  }
  if (pattern !== null && typeof pattern === "object") {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return false
    return Object.entries(pattern).every(
      ([key, member]) => Object.hasOwn(value, key) && contains((value as JsonObject)[key], member)
    )
  }
  return value === pattern
}

/** Newest first (D2): created_at DESC, id DESC. */
const newestFirst = (a: MemorySessionRow, b: MemorySessionRow): number =>
  b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

/** The repository over `db` (see module docs). */
export const makeMemoryRepo = (db: MemoryDatabase): SessionsRepo["Service"] => {
  const statement = <A>(write: (now: Date) => A) => memoryStatement(db, write)

  return {
    withTransaction: memoryTransaction(db),

    runState: (organizationId, sessionId) =>
      statement(() => {
        const session = sessionOf(db, organizationId, sessionId)
        if (session === undefined) return undefined
        const agent = session.agent_id === null ? undefined : db.agents.get(session.agent_id)
        return {
          id: session.id,
          status: session.status,
          agent_type: agent?.type ?? null,
          assistant_id: agent?.assistant_id ?? null,
          current_node_id: session.current_node_id
        }
      }),

    setCurrentNode: (sessionId, nodeId) =>
      statement(() => {
        const session = db.sessions.get(sessionId)
        if (session !== undefined) session.current_node_id = nodeId
      }),

    findAgent: (organizationId, agentId) =>
      statement(() => {
        const agent = agentOf(db, organizationId, agentId)
        return agent === undefined ? undefined : { id: agent.id, type: agent.type }
      }),

    create: (row) =>
      statement((now) => {
        upsertContact(
          db,
          { organizationId: row.organizationId, contactId: row.contactId, name: row.contactName, phone: null },
          now
        )
        const { conversation } = conversationFor(
          db,
          {
            id: db.newId(),
            organizationId: row.organizationId,
            contactId: row.contactId,
            channelType: "",
            channelTo: ""
          },
          now
        )
        insertSession(
          db,
          {
            id: row.id,
            organizationId: row.organizationId,
            conversationId: conversation.id,
            contactId: row.contactId,
            contactName: row.contactName,
            threadId: row.threadId,
            status: row.status,
            agentId: row.agentId,
            metadata: row.metadata
          },
          now
        )
      }),

    find: (organizationId, sessionId) =>
      statement(() => {
        const session = sessionOf(db, organizationId, sessionId)
        return session === undefined ? undefined : sessionObject(db, session)
      }),

    lock: (organizationId, sessionId) =>
      statement(() => {
        const session = sessionOf(db, organizationId, sessionId)
        return session === undefined
          ? undefined
          : { id: session.id, status: session.status, agent_id: session.agent_id, thread_id: session.thread_id }
      }),

    update: (sessionId, fields) =>
      statement((now) => {
        const session = db.sessions.get(sessionId)
        if (session === undefined) return
        const closes = session.status === "open" && fields.status === "closed"
        if (fields.status !== undefined) session.status = fields.status
        if (fields.agentId !== undefined) {
          session.agent_id = fields.agentId
          session.agent_type = fields.agentId === null ? null : (db.agents.get(fields.agentId)?.type ?? null)
        }
        if (fields.threadId !== undefined) session.thread_id = fields.threadId
        if (fields.metadata !== undefined) session.metadata = structuredClone(fields.metadata)
        if (fields.endingSurveySubmissionId !== undefined) {
          session.ending_survey_submission_id = fields.endingSurveySubmissionId
        }
        session.updated_at = now
        if (closes) sessionClosed(db, session.id)
      }),

    writeEvents: (sessionId, events) =>
      statement((now) => {
        const session = db.sessions.get(sessionId)
        if (session === undefined) return
        for (const event of events) {
          const object: JsonObject = sessionObject(db, session)
          recordEvent(db, {
            type: event.type,
            organizationId: session.organization_id,
            object:
              event.type === "session.finished" || event.type === "session.closed"
                ? { ...object, action: event.action ?? null }
                : object,
            now
          })
        }
      }),

    search: (organizationId, search) =>
      statement(() =>
        [...db.sessions.values()]
          .filter(
            (session) =>
              session.organization_id === organizationId &&
              (search.contactId === undefined || session.contact_id === search.contactId) &&
              (search.status === undefined || session.status === search.status) &&
              (search.metadata === undefined || contains(session.metadata, search.metadata))
          )
          .sort(newestFirst)
          .slice(search.offset, search.offset + search.limit)
          .map((session) => sessionObject(db, session))
      ),

    idleSessions: (limit) =>
      statement((now) =>
        [...db.sessions.values()]
          .filter((session) => session.status === "open" && isIdleAt(db, session, now))
          .slice(0, limit)
          .map((session) => ({ id: session.id, organization_id: session.organization_id }))
      ),

    isIdle: (sessionId) =>
      statement((now) => {
        const session = db.sessions.get(sessionId)
        return session !== undefined && isIdleAt(db, session, now)
      })
  }
}
