-- holder_fence.lua: the write-back round of a fenced permit (fence.lua for holder sets).
--
-- KEYS[1] the holder set, KEYS[2] the fence counter
-- ARGV[1] our hold's value
-- ARGV[2] the token T
-- ARGV[3] how long an idle fence counter is kept, in ms; 0 = forever
--
-- When our value holds a live permit, raises the counter to at least T and returns 1;
-- otherwise returns 0 and changes nothing. Fails with REDQUORUM_FOREIGN <key>, changing
-- nothing, when the counter holds data redquorum did not write.
if not holders_owned(KEYS[1]) or not holders_has(KEYS[1], ARGV[1], now_ms()) then
  return 0
end
if not owned(KEYS[2], 'fence') then
  return foreign(KEYS[2])
end
local current = tonumber(redis.call('HGET', KEYS[2], 'token') or '0')
if current < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], 'redquorum', 'fence', 'token', ARGV[2])
end
local keep = tonumber(ARGV[3] or '0')
if keep > 0 then
  redis.call('PEXPIRE', KEYS[2], keep)
end
return 1
