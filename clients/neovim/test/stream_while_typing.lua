-- Headless test (run by stream_while_typing.sh): a user types at several places of a chat
-- buffer while a long reply streams into it, in a real Neovim against the real `flemmad lsp`
-- and flemma-mock-provider. Every keystroke and the whole reply must be in the buffer exactly
-- once at the end.
--
-- Neovim (0.7 to 0.11) answers `applied: true` to a `workspace/applyEdit` naming an older
-- version of the buffer, skips it and prints "Buffer … newer than edits."; a server that
-- believes the answer loses that piece of the reply. This test types fast enough, at enough
-- places, that such edits happen in every run (the count is printed).
--
-- Set-up as docs/editors/neovim.md says: on 0.11 `vim.lsp.config` + `vim.lsp.enable` with
-- `require("flemmad").setup({ start = false })`; on 0.7 to 0.10 `require("flemmad").setup()`.
-- Environment: FLEMMAD (the server command), CHAT (the chat file), MOCK_URL, NEOVIM_CLIENT (the
-- clients/neovim directory).
local failures, checks = 0, 0
local function check(ok, what, detail)
  checks = checks + 1
  if ok then
    io.stdout:write("ok - " .. what .. "\n")
  else
    failures = failures + 1
    io.stdout:write("not ok - " .. what .. (detail and ("\n  " .. tostring(detail)) or "") .. "\n")
  end
end
local function finish()
  io.stdout:write(string.format("%d passed, %d failed\n", checks - failures, failures))
  vim.cmd(failures > 0 and "cquit 1" or "qall!")
end

-- What Neovim tells the user (it prints "Buffer … newer than edits." for a dropped edit).
local printed = {}
print = function(...)
  table.insert(printed, table.concat(vim.tbl_map(tostring, { ... }), " "))
end
vim.notify = function(message)
  table.insert(printed, message)
end

local function text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
end

local function count(haystack, needle)
  local n, from = 0, 1
  while true do
    local at = haystack:find(needle, from, true)
    if at == nil then
      return n
    end
    n, from = n + 1, at + #needle
  end
end

--- POST a JSON body to the mock provider's control API.
local function mock_post(path, body)
  local host, port = (vim.env.MOCK_URL or ""):match("^http://([%d%.]+):(%d+)")
  assert(host, "MOCK_URL is not an http://127.0.0.1:PORT address: " .. tostring(vim.env.MOCK_URL))
  local tcp = (vim.uv or vim.loop).new_tcp()
  local response, done = {}, false
  tcp:connect(host, tonumber(port), function(err)
    assert(not err, err)
    tcp:write(string.format(
      "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
      path, host, port, #body, body))
    tcp:read_start(function(_, chunk)
      if chunk then
        table.insert(response, chunk)
      else
        tcp:close()
        done = true
      end
    end)
  end)
  assert(vim.wait(5000, function() return done end, 10), "the mock provider did not answer " .. path)
  return table.concat(response):match("^HTTP/1%.%d (%d+)")
end

-- The reply: lowercase words only (the user's keystrokes are upper case), long enough to stream
-- for several seconds.
local reply_lines = {}
local words = { "the", "river", "kept", "its", "course", "through", "quiet", "hills", "and", "old", "towns" }
for n = 1, 48 do
  local line = {}
  for k = 1, 9 do
    table.insert(line, words[(n * 3 + k) % #words + 1])
  end
  table.insert(reply_lines, "part " .. n .. ": " .. table.concat(line, " ") .. ".")
end
local reply = table.concat(reply_lines, "\n")
check(mock_post("/_mock/turns", vim.fn.json_encode({ { steps = { { text = reply } }, bytes_per_sec = 6000 } })) == "200",
  "the mock provider takes the scripted reply")

-- Set-up, as a user of this Neovim version does it.
vim.opt.runtimepath:prepend(vim.env.NEOVIM_CLIENT)
local flemmad = require("flemmad")
local version = vim.version()
if vim.lsp.config ~= nil and vim.lsp.enable ~= nil then
  flemmad.setup({ start = false })
  vim.lsp.config("flemmad", { cmd = { vim.env.FLEMMAD, "lsp" } })
  vim.lsp.enable("flemmad")
else
  flemmad.setup({ cmd = { vim.env.FLEMMAD, "lsp" } })
end
io.stdout:write(string.format("-- Neovim %d.%d.%d, set up with %s\n", version.major, version.minor, version.patch,
  vim.lsp.enable ~= nil and "vim.lsp.config + vim.lsp.enable" or "require('flemmad').setup()"))

vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHAT))
local bufnr = vim.api.nvim_get_current_buf()
local attached = vim.wait(15000, function()
  local c = flemmad.client(bufnr)
  return c ~= nil and c.initialized and vim.lsp.buf_is_attached(bufnr, c.id)
end, 20)
check(attached, "flemmad lsp attaches to the chat buffer")
if not attached then
  return finish()
end

local function line_of(prefix)
  for n, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:sub(1, #prefix) == prefix then
      return n
    end
  end
  return nil
end

--- Types `keys` one at a time in insert mode at (line, col) (1-based line, 0-based byte column),
--- as a user does, letting Neovim's event loop run between keystrokes.
local function type_at(line, col, keys)
  for i = 1, #keys do
    -- Normal mode cannot put the cursor after the last character: append after the one before.
    local at = col + i - 1
    local command = "i"
    if at > 0 then
      at, command = at - 1, "a"
    end
    vim.api.nvim_win_set_cursor(0, { line, at })
    local ch = keys:sub(i, i)
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(command .. ch .. "<Esc>", true, false, true), "x", false)
    vim.wait(25)
  end
end

-- The user finishes the question, then sends (<C-]>).
local question = line_of("Tell me a long story")
type_at(question, #"Tell me a long story", ", please")
local before = text(bufnr)
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-]>", true, false, true), "x", false)
check(vim.wait(15000, function() return text(bufnr):find("@Assistant:", #before, true) ~= nil end, 20),
  "<C-]> sends: the reply starts streaming into the buffer", text(bufnr))

-- While it streams: tokens typed at the end of the first message, at the end of the question,
-- and at the start of a line of the reply already written.
local typed = {}
local function streaming()
  local t = text(bufnr)
  return t:find(reply_lines[#reply_lines], 1, true) == nil or t:find("@You:", t:find("@Assistant:", 1, true), true) == nil
end
local started = (vim.uv or vim.loop).now()
local deadline = started + 40000
while streaming() and (vim.uv or vim.loop).now() < deadline do
  local place = #typed % 3
  local line, col
  if place == 0 then
    line = line_of("Some context for the story")
  elseif place == 1 then
    line = line_of("Tell me a long story")
  else
    -- The start of the reply's second line, once it is there.
    local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
    for k = #lines, 1, -1 do
      if lines[k] == "@Assistant:" then
        if #lines >= k + 3 then
          line, col = k + 2, 0
        end
        break
      end
    end
  end
  if line == nil then
    vim.wait(30)
  else
    local token = "K" .. (#typed + 1) .. "X "
    col = col or #vim.api.nvim_buf_get_lines(bufnr, line - 1, line, false)[1]
    type_at(line, col, token)
    table.insert(typed, token)
  end
end
io.stdout:write(string.format("-- the reply streamed for %d ms while the user typed\n", (vim.uv or vim.loop).now() - started))
-- Let the last edits land and the engine wind down: the reply closed by an empty @You:, then
-- the text unchanged for 1.5 s (vim.wait checks after every event too, so the time is counted
-- here, not by its interval).
local clock = vim.uv or vim.loop
local settled, since = text(bufnr), clock.now()
vim.wait(30000, function()
  local now = text(bufnr)
  if now ~= settled then
    settled, since = now, clock.now()
    return false
  end
  return not streaming() and now:find(reply_lines[#reply_lines] .. "\n\n@You:", 1, true) ~= nil
    and clock.now() - since >= 1500
end, 100)
local final = text(bufnr)

-- Every keystroke once; with them taken out, the reply exactly once and the rest as it was.
local missing, doubled = {}, {}
local stripped = final
for _, token in ipairs(typed) do
  local c = count(final, token)
  if c == 0 then
    table.insert(missing, token)
  elseif c > 1 then
    table.insert(doubled, token)
  end
  stripped = stripped:gsub(vim.pesc(token), "", 1)
end
local dropped = 0
for _, message in ipairs(printed) do
  if message:find("newer than edits", 1, true) then
    dropped = dropped + 1
  end
end
io.stdout:write(string.format("-- %d tokens typed (%d keystrokes) while the reply streamed; Neovim dropped %d stale edits\n",
  #typed, #typed * 4, dropped))
check(#typed >= 6, "the user typed while the reply streamed", #typed)
check(#missing == 0 and #doubled == 0, "every keystroke is in the buffer exactly once",
  "missing: " .. table.concat(missing, ",") .. " doubled: " .. table.concat(doubled, ","))
check(count(stripped, reply) == 1, "the whole reply is in the buffer exactly once", final)
check(stripped:sub(1, #before) == before and stripped:sub(#before + 1):find("^\n*@Assistant:\n") ~= nil,
  "what was there before the reply is unchanged", stripped)
check(stripped:find(reply .. "\n\n@You:", 1, true) ~= nil, "the reply ends with an empty @You:", stripped)
finish()
