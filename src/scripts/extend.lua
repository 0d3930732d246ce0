-- extend.lua: push back the expiry of a lock we hold, and only of a lock we hold.
--
-- KEYS    the lock keys, sorted and de-duplicated by the client
-- ARGV[1] our lock value
-- ARGV[2] the new time-to-live in milliseconds (a positive integer)
--
-- Returns 1 when every key holds ARGV[1]: each key's expiry becomes the later of its
-- current expiry and now + ARGV[2] (an extension never shortens a lock, so a failed
-- or partial extension cannot make the holder's old deadline unsafe).
-- Returns 0, changing nothing, when any key is missing or holds another value: a key
-- that is gone is never recreated and someone else's key is never touched.
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return 1
