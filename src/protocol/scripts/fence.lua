-- fence.lua: the write-back round of a fenced acquisition.
--
-- KEYS    the m lock keys, then the m fence counters of the same resources
-- ARGV[1] our lock value
-- ARGV[2] the token T (the largest counter the granting masters returned)
-- ARGV[3] how long an idle fence counter is kept, in ms; 0 = forever
--
-- When every lock key still holds ARGV[1], raises every fence counter to at least T and
-- returns 1. Otherwise returns 0 and changes nothing: a counter is only raised while we
-- provably hold the lock on this master, which is what makes tokens monotonic (see the
-- crate docs, "Fencing tokens"). Fails with REDQUORUM_FOREIGN <key>, changing nothing,
-- when a counter holds data redquorum did not write.
local m = #KEYS / 2
for i = 1, m do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = m + 1, 2 * m do
  if not owned(KEYS[i], 'fence') then
    return foreign(KEYS[i])
  end
end
local token = tonumber(ARGV[2])
local keep = tonumber(ARGV[3] or '0')
for i = m + 1, 2 * m do
  local current = tonumber(redis.call('HGET', KEYS[i], 'token') or '0')
  if current < token then
    redis.call('HSET', KEYS[i], 'redquorum', 'fence', 'token', ARGV[2])
  end
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[i], keep)
  end
end
return 1
