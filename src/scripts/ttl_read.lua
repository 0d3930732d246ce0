-- ttl_read.lua: the longest ttl this master knows to be in use.
--
-- KEYS[1] the restart guard's ttl records
--
-- Returns the largest ttl (ms) whose record has not run out on this master's clock, 0 when
-- there is none. Changes nothing. Fails with REDQUORUM_FOREIGN <key> when the key holds
-- data redquorum did not write.
if not owned(KEYS[1], 'ttls') then
  return foreign(KEYS[1])
end
return longest_ttl(KEYS[1], now_ms())
