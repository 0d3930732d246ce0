-- acquire.lua: take every key of one lock on this node, or none of them.
--
-- KEYS   the lock keys, sorted and de-duplicated by the client (one or more)
-- ARGV[1] the lock value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
--
-- Returns 1 when every key was absent and is now set to ARGV[1] with PX ARGV[2];
-- returns 0, changing nothing, when any key already exists (whatever its value,
-- ours included: a lock is never re-entered by a second acquisition).
-- Scripts run atomically, so a multi-resource lock is all-or-nothing on each node.
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
