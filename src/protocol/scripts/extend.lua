-- extend.lua: push back the expiry of a lock we hold, and only of a lock we hold.
--
-- KEYS    the lock keys, sorted and de-duplicated by the client, then, when guarded, the
--         restart guard's ttl records
-- ARGV[1] our lock value
-- ARGV[2] the new time-to-live in milliseconds (a positive integer)
-- ARGV[3] 1 when guarded (the last key is the ttl records), else 0 or absent
--
-- Returns 1 when every lock key holds ARGV[1]: each key's expiry becomes the later of its
-- current expiry and now + ARGV[2] (an extension never shortens a lock, so a failed
-- or partial extension cannot make the holder's old deadline unsafe), and, guarded, the
-- ttl is recorded, so that a master that later loses its data is kept out for at least it.
-- Returns 0, changing nothing, when any key is missing or holds another value: a key
-- that is gone is never recreated and someone else's key is never touched.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when the records key holds data
-- redquorum did not write.
local guarded = ARGV[3] == '1'
local n = #KEYS
if guarded then
  n = n - 1
end
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
if guarded then
  if not owned(KEYS[n + 1], 'ttls') then
    return foreign(KEYS[n + 1])
  end
  record_ttl(KEYS[n + 1], ARGV[2], now_ms())
end
local ttl = tonumber(ARGV[2])
for i = 1, n do
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return 1
