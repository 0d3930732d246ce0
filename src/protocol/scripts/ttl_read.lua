-- ttl_read.lua: the longest ttl this master knows to be in use, and whether it can be
-- believed (restart guard v3: only readers that cannot have lost the records count).
--
-- KEYS[1] the restart guard's ttl records
-- KEYS[2] the restart guard's epoch marker
-- ARGV[1] '1' to leave a trace that replicates (the marker's `probe` field, only when the
--         marker is present and ours): behind a Sentinel group the client then sends WAIT,
--         which counts replicas only up to this connection's last write; else '0' or absent
--
-- Returns {longest, present, run_id, durable, since, now, cause}, changing nothing else:
-- longest  the largest ttl (ms) whose record has not run out on this master's clock, 0 when
--          there is none;
-- present  1 when the marker exists, else 0 (then the rest are 0 or '');
-- run_id   the run_id the marker was last confirmed by (the client compares it with the
--          server's, read on the same connection just before);
-- durable  1 when every confirmation of the epoch said the server persists every write;
-- since    the epoch's start, and now, both on this master's clock in ms;
-- cause    what began the epoch ('commissioned', 'first-seen', …; '' without a marker).
-- Fails with REDQUORUM_FOREIGN <key> when a key holds data redquorum did not write.
if not owned(KEYS[1], 'ttls') then
  return foreign(KEYS[1])
end
if not owned(KEYS[2], 'guard') then
  return foreign(KEYS[2])
end
local now = now_ms()
local longest = longest_ttl(KEYS[1], now)
local m = redis.call('HMGET', KEYS[2], 'epoch', 'run_id', 'since', 'durable', 'cause')
if not m[1] then
  return {longest, 0, '', 0, 0, now, ''}
end
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[2], 'probe', ms(now))
end
local durable = 0
if m[4] == '1' then
  durable = 1
end
return {longest, 1, m[2] or '', durable, tonumber(m[3]) or now, now, m[5] or ''}
