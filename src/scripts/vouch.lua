-- vouch.lua: restore a master's ttl records after it lost data, and vouch for its epoch
-- (restart guard v3).
--
-- KEYS[1] the restart guard's epoch marker
-- KEYS[2] the restart guard's ttl records
-- ARGV[1] the epoch the verifier read on this master
-- ARGV[2] the deployment's longest ttl in ms, as the verifier established it from enough
--         trusted readers (or the declared deployment_max_ttl)
--
-- Only while the marker still names epoch ARGV[1] (compare-and-set: a loss in between
-- began another epoch, which stays unvouched): records ARGV[2] as a ttl in use (until now +
-- 2·ARGV[2], never lowering a record) and sets the marker's `vouched`. From then on the
-- master's records cover every lock that can still be live, and other verifiers may believe
-- its "longest ttl". Returns 1, or 0 when the epoch changed. Fails with
-- REDQUORUM_FOREIGN <key>, changing nothing, when a key holds data redquorum did not write.
if not owned(KEYS[1], 'guard') then
  return foreign(KEYS[1])
end
if not owned(KEYS[2], 'ttls') then
  return foreign(KEYS[2])
end
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) > 0 then
  record_ttl(KEYS[2], ARGV[2], now_ms())
end
redis.call('HSET', KEYS[1], 'vouched', '1')
return 1
