-- members.lua: the memory of which servers are in service (restart guard v3), kept on every
-- other member so that a member whose own data was deleted cannot be commissioned as new.
--
-- KEYS[1] the members key (`{prefix}members`, kind `members`)
-- ARGV[1] 'remember' or 'recall'
-- ARGV[2] the server's run_id
-- ARGV[3] the server's address as the client names it (a URL without password)
-- ARGV[4] with remember: how long a run_id is remembered after it was last seen, in ms
--
-- remember: notes both, with this master's time (an address is remembered for good, a
--           run_id until ARGV[4] after it was last seen); returns 1.
-- recall:   returns {run_id known, address known} as 1 or 0, changing nothing.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when the key holds data redquorum did
-- not write.
if not owned(KEYS[1], 'members') then
  return foreign(KEYS[1])
end
local run, addr = 'run:' .. ARGV[2], 'addr:' .. ARGV[3]
local now = now_ms()
if ARGV[1] == 'recall' then
  local m = redis.call('HMGET', KEYS[1], run, addr)
  local run_known = 0
  if m[1] and tonumber(m[1]) > now then
    run_known = 1
  end
  local addr_known = 0
  if m[2] then
    addr_known = 1
  end
  return {run_known, addr_known}
end
local keep = tonumber(ARGV[4])
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local name, value = fields[i], tonumber(fields[i + 1])
  if string.sub(name, 1, 4) == 'run:' and (value == nil or value <= now) then
    redis.call('HDEL', KEYS[1], name)
  end
end
redis.call('HSET', KEYS[1], 'redquorum', 'members', run, ms(now + keep), addr, ms(now))
return 1
