-- members.lua: the memory of which servers are in service (restart guard v3), kept on every
-- other member so that a member whose own data was deleted cannot be commissioned as new.
--
-- KEYS[1]    the members key (`{prefix}members`, kind `members`)
-- ARGV[1]    'remember' or 'recall'
-- ARGV[2]    the server's identity (its run_id; behind a Sentinel group, with the
--            replication id, which every promotion changes)
-- ARGV[3]    with remember: how long an identity is remembered after it was last seen, in ms
-- ARGV[4..]  the server's addresses as clients name them (the URL without password, and
--            each `ip:port` its host resolves to)
--
-- remember: notes the identity (until ARGV[3] from now) and every address (for good);
--           returns 1.
-- recall:   returns {identity known, any address known} as 1 or 0, changing nothing.
-- Fails with REDQUORUM_FOREIGN <key>, changing nothing, when the key holds data redquorum did
-- not write.
if not owned(KEYS[1], 'members') then
  return foreign(KEYS[1])
end
local run = 'run:' .. ARGV[2]
local now = now_ms()
if ARGV[1] == 'recall' then
  local run_known = 0
  local seen = redis.call('HGET', KEYS[1], run)
  if seen and tonumber(seen) > now then
    run_known = 1
  end
  local addr_known = 0
  for i = 4, #ARGV do
    if redis.call('HEXISTS', KEYS[1], 'addr:' .. ARGV[i]) == 1 then
      addr_known = 1
    end
  end
  return {run_known, addr_known}
end
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local name, value = fields[i], tonumber(fields[i + 1])
  if string.sub(name, 1, 4) == 'run:' and (value == nil or value <= now) then
    redis.call('HDEL', KEYS[1], name)
  end
end
redis.call('HSET', KEYS[1], 'redquorum', 'members', run, ms(now + tonumber(ARGV[3])))
for i = 4, #ARGV do
  redis.call('HSET', KEYS[1], 'addr:' .. ARGV[i], ms(now))
end
return 1
