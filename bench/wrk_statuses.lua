-- wrk script: count responses by HTTP status, printed after wrk's report as "status <code> <count>" lines.
-- Each wrk thread has its own Lua state; setup() keeps the threads so done() can read their counts.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {} -- a global: thread:get() reads it from done()
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      io.write(string.format("status %d %d\n", status, count))
    end
  end
end
