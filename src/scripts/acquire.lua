-- acquire.lua: take every key of one lock on this node, or none of them.
--
-- KEYS    the m lock keys (sorted and de-duplicated by the client), then, when fenced,
--         the m fence counters of the same resources, then, when guarded, the guard marker
-- ARGV[1] the lock value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
-- ARGV[3] m, the number of lock keys
-- ARGV[4] 1 when fenced, else 0
-- ARGV[5] 1 when guarded, else 0
--
-- Returns {0}, changing nothing, when any lock key already exists (whatever its value,
-- ours included: a lock is never re-entered by a second acquisition).
-- Otherwise sets every lock key to ARGV[1] with PX ARGV[2], increments every fence
-- counter (counters have no expiry), and returns {1, token, marker}: token is the largest
-- incremented counter (0 when not fenced), marker the guard marker's value (false when
-- absent or not guarded), so the client can tell a master that lost its data since it
-- last checked it.
-- Scripts run atomically, so a multi-resource lock is all-or-nothing on each node.
local m = tonumber(ARGV[3])
for i = 1, m do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return {0}
  end
end
for i = 1, m do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local token = 0
local next_key = m + 1
if ARGV[4] == '1' then
  for i = m + 1, 2 * m do
    local v = redis.call('INCR', KEYS[i])
    if v > token then
      token = v
    end
  end
  next_key = 2 * m + 1
end
local marker = false
if ARGV[5] == '1' then
  marker = redis.call('GET', KEYS[next_key])
end
return {1, token, marker}
