-- wrk script for the authenticated POST /emit scenario.
-- Key and body come from the environment (set by bench/run.ts), or from wrk args after `--`:
--   BENCH_API_KEY=key wrk -t2 -c50 -d5s --latency -s bench/emit.lua http://127.0.0.1:PORT/emit
--   wrk -t2 -c50 -d5s --latency -s bench/emit.lua http://127.0.0.1:PORT/emit -- <api_key> [<json body>]
local key = os.getenv("BENCH_API_KEY") or ""
local body = os.getenv("BENCH_BODY") or '{"signal_type":"pulse","content":"bench"}'

local function apply()
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  if key ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. key
  end
end

apply()

function init(args)
  if args[1] ~= nil and args[1] ~= "" then key = args[1] end
  if args[2] ~= nil and args[2] ~= "" then body = args[2] end
  apply()
end
