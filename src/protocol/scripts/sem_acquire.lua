-- sem_acquire.lua: take one of the k permits of a counting semaphore on this node.
--
-- KEYS[1] the holders (a holder set: each permit's value scored by its expiry, and k)
-- then, when fenced, the fence counter; then, when guarded, the epoch marker and the ttl
-- records
-- ARGV[1] the permit's value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
-- ARGV[3] k, the number of permits (a positive integer)
-- ARGV[4] 1 when fenced, else 0
-- ARGV[5] 1 when guarded, else 0
-- ARGV[6] when fenced: how long an idle fence counter is kept, in ms; 0 = forever
--
-- Permits whose hold ran out are dropped first, so a crashed holder's permit comes back
-- after its ttl. Returns {0, 'full'} when k permits are held, {0, 'count-mismatch', k'} when
-- the permits were taken with another k (every client must use the same k for a resource),
-- changing nothing else. Otherwise records the ttl (guarded), adds the permit, increments
-- the fence counter (fenced) and returns {1, token, epoch} as acquire.lua does.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when one of redquorum's own keys
-- holds data redquorum did not write.
local holders = KEYS[1]
local ttl = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local fenced, guarded = ARGV[4] == '1', ARGV[5] == '1'
local fence, marker, records = nil, nil, nil
local next_key = 2
if fenced then
  fence = KEYS[2]
  next_key = 3
end
if guarded then
  marker, records = KEYS[next_key], KEYS[next_key + 1]
end
if not holders_owned(holders) then
  return foreign(holders)
end
if fenced and not owned(fence, 'fence') then
  return foreign(fence)
end
if guarded and not owned(marker, 'guard') then
  return foreign(marker)
end
if guarded and not owned(records, 'ttls') then
  return foreign(records)
end
local now = now_ms()
local live = holders_live(holders, now)
local recorded_k = redis.call('ZSCORE', holders, 'redquorum:k')
if live > 0 and recorded_k and -tonumber(recorded_k) ~= k then
  return {0, 'count-mismatch', -tonumber(recorded_k)}
end
if live >= k then
  return {0, 'full'}
end
if guarded then
  record_ttl(records, ARGV[2], now)
end
redis.call('ZADD', holders, -k, 'redquorum:k')
holders_add(holders, ARGV[1], now + ttl)
local token = 0
if fenced then
  token = redis.call('HINCRBY', fence, 'token', 1)
  redis.call('HSET', fence, 'redquorum', 'fence')
  local keep = tonumber(ARGV[6])
  if keep > 0 then
    redis.call('PEXPIRE', fence, keep)
  end
end
local epoch = false
if guarded then
  epoch = redis.call('HGET', marker, 'epoch')
end
return {1, token, epoch}
