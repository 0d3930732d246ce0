-- extend_many.lua: extend.lua for a renewal batch of plain mutex locks (one key each, no
-- fence counters), all with the same ttl: one call instead of one per lock.
--
-- KEYS      the lock keys, one per lock, then, when guarded, the restart guard's ttl
--           records
-- ARGV[1]   the new time-to-live in milliseconds (a positive integer), the same for every
--           lock of the call
-- ARGV[2]   1 when guarded (the last key is the ttl records), else 0
-- ARGV[2+i] the value of the lock on KEYS[i]
--
-- Returns one integer per lock key, in order: 1 when KEYS[i] holds ARGV[2+i] — its expiry
-- becomes the later of its current expiry and now + ARGV[1], as extend.lua's (a key of
-- ours that has no expiry keeps none) — else 0, the key untouched: a key that is gone is
-- never recreated, a key holding another value (or data of another type) is never changed.
-- Guarded, when any key holds its value, the ttl is recorded once, before any key is
-- extended (as extend.lua, where the record goes before the extension): every ttl the call
-- extends is recorded, so that a master that later loses its data is kept out for at least
-- it. Fails with REDQUORUM_FOREIGN <key>, changing nothing, when the records key holds data
-- redquorum did not write.
--
-- Per lock the master runs one read (a single MGET for all) and one write: `PEXPIRE … GT`
-- from Redis 7, else PTTL then PEXPIRE.
local ttl = ARGV[1]
local guarded = ARGV[2] == '1'
local n = #KEYS
if guarded then
  n = n - 1
end
if n == 0 then
  return {}
end
-- MGET answers nil for a key that is missing or holds data of another type.
local values = redis.call('MGET', unpack(KEYS, 1, n))
local answers = {}
local any = false
for i = 1, n do
  if values[i] == ARGV[2 + i] then
    answers[i] = 1
    any = true
  else
    answers[i] = 0
  end
end
if guarded and any then
  if not owned(KEYS[n + 1], 'ttls') then
    return foreign(KEYS[n + 1])
  end
  record_ttl(KEYS[n + 1], ttl, now_ms())
end
if (redis.REDIS_VERSION_NUM or 0) >= 0x070000 then
  for i = 1, n do
    if answers[i] == 1 then
      redis.call('PEXPIRE', KEYS[i], ttl, 'GT')
    end
  end
else
  local wanted = tonumber(ttl)
  for i = 1, n do
    if answers[i] == 1 then
      local left = redis.call('PTTL', KEYS[i])
      if left >= 0 and left < wanted then
        redis.call('PEXPIRE', KEYS[i], ttl)
      end
    end
  end
end
return answers
