-- Real Lua: closures, tables, strings, metatables, sorting, coroutines, errors caught by
-- pcall (a longjmp through the interpreter's C frames), and the garbage collector.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end

local words = {}
for w in ("the quick brown fox jumps over the lazy dog again and again"):gmatch("%a+") do
  words[#words + 1] = w:upper():reverse()
end
table.sort(words, function(a, b) return #a < #b or (#a == #b and a < b) end)

local Vec = {}
Vec.__index = Vec
Vec.__add = function(a, b) return setmetatable({x = a.x + b.x, y = a.y + b.y}, Vec) end
local acc = setmetatable({x = 0, y = 0}, Vec)
for i = 1, 500 do acc = acc + setmetatable({x = i, y = -i}, Vec) end

local gen = coroutine.wrap(function()
  for i = 1, 50 do coroutine.yield(i * i) end
end)
local squares = 0
for _ = 1, 50 do squares = squares + gen() end

local caught = 0
for i = 1, 40 do
  local ok = pcall(function() if i % 3 == 0 then error("boom " .. i) end return i end)
  if not ok then caught = caught + 1 end
end

local parts = {}
for i = 1, 300 do parts[#parts + 1] = string.format("%05d:%s", i, tostring(i * 7 % 13)) end
local joined = table.concat(parts, ","):gsub("0", "o")
collectgarbage()

print(fib(18), words[1], acc.x, acc.y, squares, caught, #joined)
