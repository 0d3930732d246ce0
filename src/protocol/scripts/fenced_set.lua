-- fenced_set.lua: a write to a resource protected by fencing tokens.
--
-- KEYS[1] the data key
-- KEYS[2] the key holding the largest token that has written the data
-- ARGV[1] the value to write
-- ARGV[2] the writer's fencing token (a non-negative integer)
--
-- Writes ARGV[1] to KEYS[1] and records ARGV[2] in KEYS[2], returning 1, when ARGV[2] is
-- at least the recorded token (or none is recorded). Returns 0 and changes nothing when
-- a later holder has already written: the writer's lock has expired.
local token = tonumber(ARGV[2])
local seen = tonumber(redis.call('GET', KEYS[2]) or '-1')
if token < seen then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
