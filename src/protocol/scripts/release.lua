-- release.lua: delete the keys of a lock we hold, and only those.
--
-- KEYS    the lock keys, sorted and de-duplicated by the client
-- ARGV[1] our lock value
--
-- Deletes every key whose value equals ARGV[1] and returns how many were deleted
-- (0 when none of them is ours any more: expired, released, or taken by someone
-- else, whose key is left untouched).
local deleted = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
end
return deleted
