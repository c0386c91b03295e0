-- same_bytes.sh's Neovim half: the conversation as a user has it in Neovim. <C-]> sends; when
-- the engine stops, the user types the next message on the line under the last @You: and sends
-- again; <M-a> on the placeholder approves the bash call; when the engine is idle again,
-- :w. What the server says it did arrives as flemma/event notifications (engine:stopped).
local stops = {}
-- The plugin's handler of the client's flemma/event notifications, wrapped.
local flemmad = require("flemmad")
local on_event = flemmad.on_event
flemmad.on_event = function(err, event, ctx)
  if type(event) == "table" and event.name == "engine:stopped" then
    table.insert(stops, event.data and event.data.reason or "?")
  end
  return on_event(err, event, ctx)
end
local function fail(what)
  io.stdout:write("not ok - " .. what .. "\n")
  vim.cmd("cquit 1")
end
local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end
local function stopped(count, reason)
  if not vim.wait(60000, function() return #stops >= count end, 20) then
    fail("the engine did not stop (" .. reason .. ") within 60 s; stops: " .. vim.inspect(stops))
  end
  if stops[count] ~= reason then
    fail("the engine stopped " .. tostring(stops[count]) .. ", not " .. reason)
  end
end
local function last_line_of(prefix)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  for n = #lines, 1, -1 do
    if lines[n]:sub(1, #prefix) == prefix then
      return n
    end
  end
  fail("no line starts with " .. prefix)
end

vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHAT))
local bufnr = vim.api.nvim_get_current_buf()
local attached = vim.wait(10000, function()
  local c = require("flemmad").client(bufnr)
  return c ~= nil and c.initialized and vim.lsp.buf_is_attached(bufnr, c.id)
end, 20)
if not attached then
  fail("flemmad did not attach")
end
press("<C-]>")
stopped(1, "idle")
-- The user writes the next message under the last @You: and sends it.
vim.api.nvim_win_set_cursor(0, { last_line_of("@You:") + 1, 0 })
press("iRun echo hi.<Esc>")
press("<C-]>")
stopped(2, "awaiting-approval")
vim.api.nvim_win_set_cursor(0, { last_line_of("**Tool Result:** `" .. vim.env.TOOL_ID .. "` (pending)"), 0 })
press("<M-a>")
stopped(3, "idle")
vim.cmd("silent write")
vim.cmd("qall!")
