-- withdraw.lua: a client saw this master not persisting every write (appendonly or
-- appendfsync changed at run time): its epoch is no longer durable (restart guard v3).
--
-- KEYS[1] the restart guard's epoch marker
--
-- Clears the marker's `durable` flag, so that the next restart of this server is treated as
-- a data loss whatever its configuration then. Never creates the marker. Returns 1 when the
-- flag was cleared, 0 when there was nothing to clear. Fails with REDQUORUM_FOREIGN <key>
-- when the key holds data redquorum did not write.
if not owned(KEYS[1], 'guard') then
  return foreign(KEYS[1])
end
if redis.call('HGET', KEYS[1], 'durable') == '1' then
  redis.call('HSET', KEYS[1], 'durable', '0')
  return 1
end
return 0
