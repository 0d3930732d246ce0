-- release.lua: delete the keys of a lock we hold, and only those.
--
-- KEYS    the lock keys, sorted and de-duplicated by the client
-- ARGV[1] our lock value
--
-- Deletes every key whose value equals ARGV[1] and returns how many were deleted
-- (0 when none of them is ours any more: expired, released, or taken by someone
-- else, whose key is left untouched). Announces each deleted key with
-- PUBLISH <key> released (the channel is named like the key: on a cluster member the same
-- name hashes to the key's slot, so SPUBLISH can replace PUBLISH there); a key that was not
-- ours is not announced. Waiting clients subscribe to it (DESIGN §2.9). `pcall`: a user whose
-- ACL refuses PUBLISH still releases (its waiters poll).
local deleted = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    redis.pcall('PUBLISH', KEYS[i], 'released')
    deleted = deleted + 1
  end
end
return deleted
