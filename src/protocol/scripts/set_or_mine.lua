-- set_or_mine.lua: SET NX PX made idempotent, for sending an acquire once more after its
-- connection was found broken (the master restarted, or the network reset it) without
-- knowing whether the first one was applied.
--
-- KEYS[1] the lock key
-- ARGV[1] the lock value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds
--
-- Returns status OK when the key was absent and is now set to ARGV[1] with PX ARGV[2], or
-- when it already holds ARGV[1] (the first send was applied: its expiry, set no earlier
-- than the attempt's start, is left as it is, never lengthened); nil when it holds another
-- value. The reply is the same as SET NX PX's, so the member reads it the same way.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {ok = 'OK'}
end
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
