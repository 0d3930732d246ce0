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
-- becomes the later of its current expiry and now + ARGV[1], as extend.lua's — else 0, the
-- key untouched: a key that is gone is never recreated, a key holding another value (or
-- data of another type) is never changed. Guarded, when any key holds its value, the ttl
-- is recorded once, before any key is extended (as extend.lua, where the record goes before
-- the extension): every ttl the call extends is recorded, so that a master that later loses
-- its data is kept out for at least it. Fails with REDQUORUM_FOREIGN <key>, changing
-- nothing, when the records key holds data redquorum did not write.
local ttl = tonumber(ARGV[1])
local guarded = ARGV[2] == '1'
local n = #KEYS
if guarded then
  n = n - 1
end
local answers = {}
local any = false
for i = 1, n do
  -- pcall: a key of another type is someone else's, answered 0 like any other value.
  if redis.pcall('GET', KEYS[i]) == ARGV[2 + i] then
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
  record_ttl(KEYS[n + 1], ARGV[1], now_ms())
end
for i = 1, n do
  if answers[i] == 1 and redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return answers
