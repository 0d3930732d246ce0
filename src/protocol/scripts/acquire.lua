-- acquire.lua: take every key of one lock on this node, or none of them.
--
-- KEYS    the m lock keys (sorted and de-duplicated by the client), then, when fenced,
--         the m fence counters of the same resources, then, when guarded, the restart
--         guard's epoch marker and its ttl records (the records may be left out: on a
--         Redis Cluster member the records live in a slot of their own, written apart)
-- ARGV[1] the lock value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
-- ARGV[3] m, the number of lock keys
-- ARGV[4] 1 when fenced, else 0
-- ARGV[5] 1 when guarded, else 0
-- ARGV[6] when fenced: how long an idle fence counter is kept, in ms; 0 = forever
--
-- Returns {0, '', 0, pttl}, changing nothing, when any lock key already exists (whatever
-- its value, ours included: a lock is never re-entered by a second acquisition); pttl is
-- that key's remaining time to live in ms (-1: none), for a waiting client.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when a counter, the marker or the
-- records key holds data redquorum did not write.
-- Otherwise records the ttl (guarded), sets every lock key to ARGV[1] with PX ARGV[2],
-- increments every fence counter, and returns {1, token, epoch}: token is the largest
-- incremented counter (0 when not fenced), epoch the marker's epoch (false when absent or
-- not guarded), so the client can tell a master that lost its data or began a new epoch.
-- Scripts run atomically, so a multi-resource lock is all-or-nothing on each node.
local m = tonumber(ARGV[3])
for i = 1, m do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return {0, '', 0, redis.call('PTTL', KEYS[i])}
  end
end
local fenced = ARGV[4] == '1'
local guarded = ARGV[5] == '1'
local next_key = m + 1
if fenced then
  for i = m + 1, 2 * m do
    if not owned(KEYS[i], 'fence') then
      return foreign(KEYS[i])
    end
  end
  next_key = 2 * m + 1
end
local marker, records = KEYS[next_key], KEYS[next_key + 1]
if guarded then
  local refused = acquire_foreign(nil, nil, marker, records)
  if refused then
    return refused
  end
  if records then
    record_ttl(records, ARGV[2], now_ms())
  end
end
for i = 1, m do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local token = 0
if fenced then
  for i = m + 1, 2 * m do
    local v = fence_increment(KEYS[i], ARGV[6])
    if v > token then
      token = v
    end
  end
end
return acquire_granted(token, guarded and marker)
