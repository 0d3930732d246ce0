-- rw_acquire.lua: take a read or a write hold of one resource's read-write lock on this node.
--
-- KEYS[1] the writer key (a string: the writer's value, with PX)
-- KEYS[2] the readers (a holder set: each reader's value scored by its expiry)
-- KEYS[3] the pending-writer marker (a string: a waiting writer's intent id, with PX)
-- then, when fenced, the fence counter; then, when guarded, the epoch marker and the ttl
-- records (which may be left out, as in acquire.lua)
-- ARGV[1] the hold's value: random, unique to this acquisition
-- ARGV[2] the time-to-live in milliseconds (a positive integer)
-- ARGV[3] 'read' or 'write'
-- ARGV[4] the writer's intent id (the same for every attempt of one write lock call)
-- ARGV[5] 1 when writers are preferred: a writer blocked by readers leaves its intent in
--         the pending-writer marker, which keeps new readers out until it expires (one
--         ttl) or the writer gets in
-- ARGV[6] 1 when fenced, else 0
-- ARGV[7] 1 when guarded, else 0
-- ARGV[8] when fenced: how long an idle fence counter is kept, in ms; 0 = forever
--
-- A read is granted only with no writer and no pending writer; a write only with no writer
-- and no live reader. Returns {0, blocker, 0, left} and changes nothing else when refused
-- (blocker: 'writer', 'readers' or 'pending-writer'; left: milliseconds until the blocker
-- runs out — the writer key's or the pending marker's PTTL, or the last live reader's hold
-- — so that a waiter knows when to try again if no release is announced); a preferred
-- writer blocked by readers may set the pending-writer marker to its intent. Otherwise records the ttl (guarded), adds the
-- reader or sets the writer key (clearing the writer's own pending marker), increments the
-- fence counter (fenced), and returns {1, token, epoch} as acquire.lua does.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when one of redquorum's own keys
-- holds data redquorum did not write.
local writer, readers, pending = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[2])
local reading = ARGV[3] == 'read'
local fenced, guarded = ARGV[6] == '1', ARGV[7] == '1'
local fence, marker, records = acquire_extra_keys(4, fenced, guarded)
local refused = acquire_foreign(readers, fence, marker, records)
if refused then
  return refused
end
local now = now_ms()
local live = holders_live(readers, now)
if redis.call('EXISTS', writer) == 1 then
  return {0, 'writer', 0, redis.call('PTTL', writer)}
end
if reading then
  if redis.call('EXISTS', pending) == 1 then
    return {0, 'pending-writer', 0, redis.call('PTTL', pending)}
  end
elseif live > 0 then
  if ARGV[5] == '1' then
    local intent = redis.call('GET', pending)
    if not intent or intent == ARGV[4] then
      redis.call('SET', pending, ARGV[4], 'PX', ttl)
    end
  end
  return {0, 'readers', 0, holders_left(readers, now, false)}
end
if records then
  record_ttl(records, ARGV[2], now)
end
if reading then
  holders_add(readers, ARGV[1], now + ttl)
else
  redis.call('SET', writer, ARGV[1], 'PX', ttl)
  if redis.call('GET', pending) == ARGV[4] then
    redis.call('DEL', pending)
  end
end
local token = 0
if fenced then
  token = fence_increment(fence, ARGV[8])
end
return acquire_granted(token, marker)
