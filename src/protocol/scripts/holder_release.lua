-- holder_release.lua: give up a hold of a read-write lock or a semaphore permit, and only
-- ours.
--
-- KEYS[1] the holder set (readers, or a semaphore's holders)
-- KEYS[2] for a writer: the writer key; KEYS[3] the pending-writer marker
-- ARGV[1] our hold's value
-- ARGV[2] 'holder' (a reader or a permit) or 'writer'
-- ARGV[3] a writer's intent id
--
-- A holder: removes ARGV[1] from the holder set, deleting the set once no holder is left.
-- A writer: deletes the writer key if it holds ARGV[1], and then the pending-writer marker
-- if it holds our intent. Returns how many holds were given up (0 when ours was gone).
-- Nothing that holds another client's value is touched. A hold given up is announced with
-- PUBLISH KEYS[1] released (the holder set's name, the channel readers, writers and permit
-- waiters of the resource subscribe to); nothing is announced when nothing was ours.
if ARGV[2] == 'writer' then
  if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    return 0
  end
  redis.call('DEL', KEYS[2])
  if redis.call('GET', KEYS[3]) == ARGV[3] then
    redis.call('DEL', KEYS[3])
  end
  redis.pcall('PUBLISH', KEYS[1], 'released')
  return 1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset'
  or redis.call('ZSCORE', KEYS[1], 'redquorum') ~= 'inf'
  or ARGV[1] == 'redquorum' then
  return 0
end
local released = redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCOUNT', KEYS[1], '(0', '(+inf') == 0 then
  redis.call('DEL', KEYS[1])
end
if released > 0 then
  redis.pcall('PUBLISH', KEYS[1], 'released')
end
return released
