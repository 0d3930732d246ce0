-- commission.lua: an operator's word on a master: it is new (commission), or its data can
-- no longer be trusted (reset).
--
-- KEYS[1] the epoch marker
-- ARGV[1] 'commission' or 'reset'
-- ARGV[2] the server's run_id
-- ARGV[3] 1 when the server persists every write before answering, else 0
-- ARGV[4] a fresh random epoch id
-- ARGV[5] 1 to commission even over an existing marker, else 0
--
-- commission: begins an epoch since 0, which every client counts at once (and believes as a
-- reader of ttl records: a new master never held one). Refused with
-- {0, cause, since} when the master is already in service — a marker exists whose epoch
-- began for another reason than a client's first sight of it — unless ARGV[5] is 1. The
-- caller checks beforehand that no lock key exists on the master.
-- reset: begins an epoch since now (cause reset): every client keeps the master out for
-- the deployment's longest ttl, as after a restart without persistence. Use it after
-- restoring a backup, whose old marker would otherwise vouch for keys it lacks.
-- Returns {1, epoch, since}. Fails with REDQUORUM_FOREIGN <key> when the marker holds data
-- redquorum did not write.
if not owned(KEYS[1], 'guard') then
  return foreign(KEYS[1])
end
local since = 0
local cause = 'commissioned'
if ARGV[1] == 'reset' then
  since = now_ms()
  cause = 'reset'
elseif ARGV[5] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  local m = redis.call('HMGET', KEYS[1], 'cause', 'since')
  if m[1] ~= 'first-seen' then
    return {0, m[1] or '', tonumber(m[2]) or 0}
  end
end
redis.call('HSET', KEYS[1], 'redquorum', 'guard', 'epoch', ARGV[4], 'run_id', ARGV[2],
  'since', ms(since), 'durable', ARGV[3], 'cause', cause)
return {1, ARGV[4], since}
