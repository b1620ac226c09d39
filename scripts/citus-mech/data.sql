-- Two organizations whose shards are on different workers (A on the first, B on the second:
-- checked by placements.sql), each with apps, a conversation and an open session.
INSERT INTO organizations (id, name) VALUES
  ('00000000-0000-0000-0000-00000000000a', 'A'), ('00000000-0000-0000-0000-00000000000e', 'B');
INSERT INTO apps (organization_id, id, events, ordering) VALUES
  ('00000000-0000-0000-0000-00000000000a', 'aaaaaaaa-0000-0000-0000-000000000001', '{message.created}', 'none'),
  ('00000000-0000-0000-0000-00000000000e', 'bbbbbbbb-0000-0000-0000-000000000001', '{message.created}', 'none');
INSERT INTO conversations (organization_id, id, contact_id, created_at) VALUES
  ('00000000-0000-0000-0000-00000000000a', 'aaaaaaaa-0000-0000-0000-0000000000c1', 'alice', now()),
  ('00000000-0000-0000-0000-00000000000e', 'bbbbbbbb-0000-0000-0000-0000000000c1', 'bob', now());
INSERT INTO sessions (organization_id, id, conversation_id, status, created_at) VALUES
  ('00000000-0000-0000-0000-00000000000a', 'aaaaaaaa-0000-0000-0000-0000000000f1', 'aaaaaaaa-0000-0000-0000-0000000000c1', 'open', now()),
  ('00000000-0000-0000-0000-00000000000e', 'bbbbbbbb-0000-0000-0000-0000000000f1', 'bbbbbbbb-0000-0000-0000-0000000000c1', 'open', now());
