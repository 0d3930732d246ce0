-- holder_extend.lua: push back the expiry of a reader's or a permit's hold, and only of a
-- hold we have.
--
-- KEYS[1] the holder set (readers, or a semaphore's holders)
-- KEYS[2] when guarded, the ttl records
-- ARGV[1] our hold's value
-- ARGV[2] the new time-to-live in milliseconds (a positive integer)
-- ARGV[3] 1 when guarded, else 0
--
-- Returns 1 when our value holds with a live hold: its expiry becomes the later of its
-- current one and now + ARGV[2], and the ttl is recorded (guarded). Returns 0, changing
-- nothing, when our hold is gone or ran out: it is never recreated. Fails with
-- REDQUORUM_FOREIGN <key>, changing nothing, when the records key holds data redquorum did
-- not write.
local holders = KEYS[1]
local now = now_ms()
if not holders_owned(holders) or not holders_has(holders, ARGV[1], now) then
  return 0
end
if ARGV[3] == '1' then
  if not owned(KEYS[2], 'ttls') then
    return foreign(KEYS[2])
  end
  record_ttl(KEYS[2], ARGV[2], now)
end
redis.call('ZADD', holders, 'GT', ms(now + tonumber(ARGV[2])), ARGV[1])
holders_expire(holders)
return 1
