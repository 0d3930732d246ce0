-- guard.lua: confirm this master's epoch, or begin a new one (the restart guard).
--
-- KEYS[1] the epoch marker
-- ARGV[1] the server's run_id (from INFO server, read on the same connection just before:
--         a restart in between would have broken the connection)
-- ARGV[2] 1 when the server persists every write before answering (appendonly yes and
--         appendfsync always, from CONFIG GET just before), else 0
-- ARGV[3] how long ago, at most, the server booted, in ms (from its uptime in whole
--         seconds, rounded so that it is never before the boot)
-- ARGV[4] a fresh random epoch id, used only if a new epoch begins
-- ARGV[5] the epoch this client last verified on this master, or '' if none
--
-- An epoch is one unbroken history of the master's data; its `since` is the master time
-- from which lock keys may be missing, and clients keep the master out until `since` plus
-- the deployment's longest ttl.
-- - No marker: the master is new to everyone, or its data was deleted (a flush, a restart
--   without persistence): a new epoch since now (cause first-seen, or data-lost when the
--   client had verified an epoch here before). Uptime is no safe anchor: a flush keeps it.
-- - A marker confirmed by another run_id: the master restarted. If every incarnation that
--   confirmed the epoch, and this one, persist every write, nothing was lost: the epoch is
--   kept. Otherwise the old marker survived but recent keys may not have: a new epoch
--   since the boot, or just after it (cause restarted).
--   (A restart's "since" must never be before the boot, or the quarantine ends early: the
--   client passes how far back the boot is, at most — see rules::restart_anchor_offset_ms.)
-- - Otherwise the epoch is confirmed as it is (its durability can only be withdrawn).
-- Atomic, so concurrent verifiers converge on one epoch; an epoch is never replaced by one
-- that was not derived from what this script read.
-- Returns {epoch, since, now, cause, durable}: durable is 1 when every confirmation of the
-- epoch (this one included) said the server persists every write, else 0. Fails with REDQUORUM_FOREIGN <key> when the marker
-- holds data redquorum did not write.
if not owned(KEYS[1], 'guard') then
  return foreign(KEYS[1])
end
local now = now_ms()
local function begin(since, cause)
  redis.call('HSET', KEYS[1], 'redquorum', 'guard', 'epoch', ARGV[4], 'run_id', ARGV[1],
    'since', ms(since), 'durable', ARGV[2], 'cause', cause)
  return {ARGV[4], since, now, cause, tonumber(ARGV[2])}
end
local m = redis.call('HMGET', KEYS[1], 'epoch', 'run_id', 'since', 'durable', 'cause')
if not m[1] then
  if ARGV[5] ~= '' then
    return begin(now, 'data-lost')
  end
  return begin(now, 'first-seen')
end
local since = tonumber(m[3]) or now
if m[2] ~= ARGV[1] then
  if m[4] == '1' and ARGV[2] == '1' then
    redis.call('HSET', KEYS[1], 'run_id', ARGV[1])
    return {m[1], since, now, m[5] or 'restarted', 1}
  end
  -- At or after the boot, and the boot after the crash that lost the keys.
  local boot = now - tonumber(ARGV[3])
  return begin(math.max(boot, since), 'restarted')
end
local durable = 0
if m[4] == '1' then
  if ARGV[2] == '1' then
    durable = 1
  else
    redis.call('HSET', KEYS[1], 'durable', '0')
  end
end
return {m[1], since, now, m[5] or 'first-seen', durable}
