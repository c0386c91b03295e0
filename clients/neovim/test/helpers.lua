-- What the headless Neovim tests share (smoke.lua, plugin.lua): checks printed as TAP-like
-- lines, waiting for a condition, the buffer's text, keys as a user types them, and the mock
-- provider's control API (its turns queued before each step, so every reply is known).
local T = { failures = 0, checks = 0 }

function T.check(ok, what, detail)
  T.checks = T.checks + 1
  if ok then
    io.stdout:write("ok - " .. what .. "\n")
  else
    T.failures = T.failures + 1
    io.stdout:write("not ok - " .. what .. (detail and ("\n  " .. tostring(detail)) or "") .. "\n")
  end
  return ok
end

--- Prints the tally and ends Neovim (exit 1 on a failure).
function T.finish()
  io.stdout:write(string.format("%d passed, %d failed\n", T.checks - T.failures, T.failures))
  vim.cmd(T.failures > 0 and "cquit 1" or "qall!")
end

--- Opens `$CHATS/name` and waits until the flemmad client is attached to it; its buffer, or
--- the tally and the end when it never attaches.
function T.open_chat(name)
  vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHATS .. "/" .. name))
  local chat = vim.api.nvim_get_current_buf()
  local flemmad = require("flemmad")
  local attached = T.wait(10000, function()
    local c = flemmad.client(chat)
    return c ~= nil and c.initialized and vim.lsp.buf_is_attached(chat, c.id)
  end)
  T.check(attached, "the client attaches to the chat")
  if not attached then
    T.finish()
  end
  return chat
end

function T.wait(ms, predicate)
  vim.wait(ms, predicate, 20)
  return predicate()
end

function T.text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
end

--- The 1-based line of the first line of `bufnr` that starts with `prefix`.
function T.line_of(bufnr, prefix)
  for n, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:sub(1, #prefix) == prefix then
      return n
    end
  end
  return nil
end

function T.press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end

function T.read_file(path)
  local file = io.open(path, "r")
  if file == nil then
    return nil
  end
  local content = file:read("*a")
  file:close()
  return content
end

--- One HTTP request to flemma-mock-provider's control API ($MOCK_URL); returns the status code
--- and the body, or nil and why.
function T.mock_http(method, path, body)
  local host, port = (vim.env.MOCK_URL or ""):match("^http://([%d%.]+):(%d+)")
  if host == nil then
    return nil, "MOCK_URL is not an http://127.0.0.1:PORT address: " .. tostring(vim.env.MOCK_URL)
  end
  body = body or ""
  local tcp = (vim.uv or vim.loop).new_tcp()
  local chunks, done, failure = {}, false, nil
  tcp:connect(host, tonumber(port), function(err)
    if err then
      failure, done = err, true
      return
    end
    tcp:write(string.format(
      "%s %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
      method, path, host, port, #body, body))
    tcp:read_start(function(read_err, chunk)
      if read_err then
        failure = read_err
      end
      if chunk then
        table.insert(chunks, chunk)
      else
        tcp:close()
        done = true
      end
    end)
  end)
  if not vim.wait(5000, function() return done end, 10) then
    tcp:close()
    return nil, "the mock provider did not answer " .. method .. " " .. path .. " within 5 s"
  end
  if failure then
    return nil, method .. " " .. path .. ": " .. tostring(failure)
  end
  local response = table.concat(chunks)
  local status = tonumber(response:match("^HTTP/1%.%d (%d+)"))
  return status, response:match("\r\n\r\n(.*)$") or ""
end

--- Appends scripted turns (Lua tables in the mock's JSON shape) to the mock's queue, so the next
--- requests get exactly these answers instead of the echo.
function T.queue_turns(turns)
  local status, body = T.mock_http("POST", "/_mock/turns", vim.fn.json_encode(turns))
  if status ~= 200 then
    io.stdout:write("not ok - queueing the mock provider's turns: " .. tostring(body) .. "\n")
    vim.cmd("cquit 1")
  end
end

return T
