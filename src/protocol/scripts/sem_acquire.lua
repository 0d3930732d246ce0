-- sem_acquire.lua: take one of the k permits of a counting semaphore on this node.
--
-- KEYS[1] the holders (a holder set: each permit's value scored by its expiry, and k)
-- then, when fenced, the fence counter; then, when guarded, the epoch marker and the ttl
-- records (which may be left out, as in acquire.lua)
-- ARGV[1] the permit's value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
-- ARGV[3] k, the number of permits (a positive integer)
-- ARGV[4] 1 when fenced, else 0
-- ARGV[5] 1 when guarded, else 0
-- ARGV[6] when fenced: how long an idle fence counter is kept, in ms; 0 = forever
--
-- Permits whose hold ran out are dropped first, so a crashed holder's permit comes back
-- after its ttl. Returns {0, 'full', 0, left} when k permits are held (left: milliseconds
-- until the earliest permit runs out, when a waiter may try again if no release is
-- announced), {0, 'count-mismatch', k'} when
-- the permits were taken with another k (every client must use the same k for a resource),
-- changing nothing else. Otherwise records the ttl (guarded), adds the permit, increments
-- the fence counter (fenced) and returns {1, token, epoch} as acquire.lua does.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when one of redquorum's own keys
-- holds data redquorum did not write.
local holders = KEYS[1]
local ttl = tonumber(ARGV[2])
local k = tonumber(ARGV[3])
local fenced, guarded = ARGV[4] == '1', ARGV[5] == '1'
local fence, marker, records = acquire_extra_keys(2, fenced, guarded)
local refused = acquire_foreign(holders, fence, marker, records)
if refused then
  return refused
end
local now = now_ms()
local live = holders_live(holders, now)
local recorded_k = redis.call('ZSCORE', holders, 'redquorum:k')
if live > 0 and recorded_k and -tonumber(recorded_k) ~= k then
  return {0, 'count-mismatch', -tonumber(recorded_k)}
end
if live >= k then
  return {0, 'full', 0, holders_left(holders, now, true)}
end
if records then
  record_ttl(records, ARGV[2], now)
end
redis.call('ZADD', holders, -k, 'redquorum:k')
holders_add(holders, ARGV[1], now + ttl)
local token = 0
if fenced then
  token = fence_increment(fence, ARGV[6])
end
return acquire_granted(token, marker)
