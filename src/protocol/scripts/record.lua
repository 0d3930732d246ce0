-- record.lua: record that a lock with a ttl is about to be taken on this master.
--
-- KEYS[1] the restart guard's ttl records
-- ARGV[1] the ttl in milliseconds (a positive integer)
--
-- Sent in the same pipeline as a plain `SET key value NX PX ttl`, before it, when the
-- client has not recorded a ttl this long on this master within half a ttl: the record
-- then outlives the key. Returns 1. Fails with REDQUORUM_FOREIGN <key>, changing nothing,
-- when the key holds data redquorum did not write.
if not owned(KEYS[1], 'ttls') then
  return foreign(KEYS[1])
end
record_ttl(KEYS[1], ARGV[1], now_ms())
return 1
