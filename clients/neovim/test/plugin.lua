-- Headless test of the plugin on Neovim 0.11 (run by smoke.sh), set up as docs/editors/neovim.md
-- says (init-0.11.lua: setup({ start = false }), vim.lsp.config, vim.lsp.enable), against the
-- real `flemmad lsp` and flemma-mock-provider. It checks what a Flemma user looks for: the
-- structure highlighted (the server's semantic tokens) with role rulers, a reply streaming
-- with a progress line and the window following it (and staying put when the user moves away),
-- the cursor on the new @You: or the first pending call, the usage line with the cost the
-- server reported, thinking and results folded with their previews, pending calls previewed
-- and answered from the keys, `]m` / `[m` / `im` / `am`, `:Flemma` and its completion, every
-- command telling what it did, and no hit-enter prompt.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local T = dofile(here .. "helpers.lua")
local check, wait, text, line_of, press = T.check, T.wait, T.text, T.line_of, T.press

local flemmad = require("flemmad")
local live = require("flemmad.live")
local ui = require("flemmad.ui")

-- The lifecycle events as the server sent them (the plugin's handler, wrapped).
local events = {}
local on_event = flemmad.on_event
flemmad.on_event = function(err, params, ctx)
  table.insert(events, params)
  return on_event(err, params, ctx)
end
local function event(name, nth)
  local seen = 0
  for _, e in ipairs(events) do
    if e.name == name then
      seen = seen + 1
      if seen == (nth or 1) then
        return e
      end
    end
  end
  return nil
end

local function told(needle)
  for _, entry in ipairs(flemmad.history()) do
    if entry.message:find(needle, 1, true) then
      return entry.message
    end
  end
  return nil
end

local function marks(bufnr, ns, row)
  return vim.api.nvim_buf_get_extmarks(bufnr, ns, { row, 0 }, { row, -1 }, { details = true })
end

local function virt_text(mark)
  local parts = {}
  for _, chunk in ipairs(mark[4].virt_text or {}) do
    table.insert(parts, chunk[1])
  end
  for _, line in ipairs(mark[4].virt_lines or {}) do
    for _, chunk in ipairs(line) do
      table.insert(parts, chunk[1])
    end
    table.insert(parts, "\n")
  end
  return table.concat(parts)
end

-- 1. Open: attached, highlighted by the server's semantic tokens, role lines as rulers.
vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHATS .. "/plugin.chat"))
local buf = vim.api.nvim_get_current_buf()
local win = vim.api.nvim_get_current_win()
local attached = wait(10000, function()
  local c = flemmad.client(buf)
  return c ~= nil and c.initialized and vim.lsp.buf_is_attached(buf, c.id)
end)
check(attached, "the plugin's client attaches to the chat")
if not attached then
  T.finish()
end

local you = line_of(buf, "@You:")
local function token_groups(line)
  local groups = {}
  for _, token in ipairs(vim.inspect_pos(buf, line - 1, 0).semantic_tokens) do
    groups[token.opts.hl_group] = token.opts.hl_group_link or true
  end
  return groups
end
check(wait(10000, function() return token_groups(you)["@lsp.typemod.keyword.user.chat"] ~= nil end),
  "the @You: line is highlighted from the server's semantic tokens (keyword, user)", vim.inspect(token_groups(you)))
check(vim.api.nvim_get_hl(0, { name = "@lsp.typemod.keyword.user.chat" }).link == "FlemmadRoleUser"
    and vim.fn.hlexists("FlemmadRoleUser") == 1,
  "… through the plugin's FlemmadRoleUser group", vim.inspect(token_groups(you)))
check(token_groups(1)["@lsp.typemod.macro.frontmatter.chat"] ~= nil, "the frontmatter's fence is highlighted",
  vim.inspect(token_groups(1)))
check(wait(5000, function()
  local found = marks(buf, ui.ns_rulers, you - 1)
  return found[1] ~= nil and virt_text(found[1]):find("^─ You ─+") ~= nil
end), "the @You: line is drawn as a ruler (─ You ───)", vim.inspect(marks(buf, ui.ns_rulers, you - 1)))
check(vim.lsp.inlay_hint.is_enabled({ bufnr = buf }), "inlay hints are on in the chat buffer")
check(vim.wo[win].foldexpr == "v:lua.vim.lsp.foldexpr()" and vim.wo[win].foldtext == "v:lua.vim.lsp.foldtext()",
  "folding comes from the server (vim.lsp.foldexpr, vim.lsp.foldtext)")

-- 2. Send with the cursor at the end: a long reply streams; a progress line under it; the
-- window follows; moving away stays put; coming back to the end follows again.
local lines = {}
for n = 1, 100 do
  table.insert(lines, "Line " .. n .. " of the count.")
end
local reply = table.concat(lines, "\n")
T.queue_turns({ {
  steps = { { thinking = { text = "Counting is easy.\nOne after another.", signature = "c2ln" } }, { text = reply } },
  bytes_per_sec = 20000,
  usage = { input_tokens = 120, cache_read_tokens = 2048, output_tokens = 57 },
} })
vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
local sent_at = vim.uv.hrtime()
press("<C-]>")
check(wait(10000, function() return told("flemmad: sending plugin.chat") ~= nil end),
  "<C-]> sends and says so", vim.inspect(flemmad.history()))
local progress = nil
check(wait(15000, function()
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, live.ns_progress, 0, -1, { details = true })) do
    local shown = virt_text(mark)
    if shown:match("^%S+ [%d,]+ characters · %d+s\n$") and not shown:match(" 0 characters") then
      progress = { row = mark[2], text = shown }
      return true
    end
  end
  return false
end), "while the reply streams, a progress line under it counts characters and seconds",
  vim.inspect(vim.api.nvim_buf_get_extmarks(buf, live.ns_progress, 0, -1, { details = true })))
local height = vim.api.nvim_win_get_height(win)
check(wait(15000, function() return vim.api.nvim_buf_line_count(buf) > height + 10 end),
  "the reply grows past the window's height")
local followed = vim.api.nvim_win_get_cursor(win)[1] == vim.api.nvim_buf_line_count(buf)
  and vim.fn.line("w$", win) == vim.fn.line("$", win)
check(followed, "the window follows the reply: the cursor on its last line, the last line in view",
  string.format("cursor %d, w$ %d, $ %d", vim.api.nvim_win_get_cursor(win)[1], vim.fn.line("w$", win), vim.fn.line("$", win)))
-- The user moves up: the window stays where they went while the reply goes on.
vim.api.nvim_win_set_cursor(win, { 3, 0 })
local top_then = vim.fn.line("w0", win)
local count_then = vim.api.nvim_buf_line_count(buf)
check(wait(15000, function() return vim.api.nvim_buf_line_count(buf) > count_then + 5 end), "the reply goes on")
check(vim.api.nvim_win_get_cursor(win)[1] == 3 and vim.fn.line("w0", win) == top_then,
  "after the user moved away the cursor and the view stay put",
  string.format("cursor %d, w0 %d (was %d)", vim.api.nvim_win_get_cursor(win)[1], vim.fn.line("w0", win), top_then))
-- Back at the end: followed again.
vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
count_then = vim.api.nvim_buf_line_count(buf)
check(wait(15000, function()
  return vim.api.nvim_buf_line_count(buf) > count_then + 3
    and vim.api.nvim_win_get_cursor(win)[1] == vim.api.nvim_buf_line_count(buf)
end), "coming back to the end follows the reply again",
  string.format("cursor %d of %d", vim.api.nvim_win_get_cursor(win)[1], vim.api.nvim_buf_line_count(buf)))

-- 3. The end of the reply: the cursor under the new @You:, the usage line with the cost the
-- server reported, thinking folded with its preview, the progress line gone.
check(wait(30000, function() return event("engine:stopped") ~= nil end), "the engine stops after the reply")
io.stdout:write(string.format("# the reply took %.1f s\n", (vim.uv.hrtime() - sent_at) / 1e9))
local last_you = nil
for n, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if line == "@You:" then
    last_you = n
  end
end
check(text(buf):find(lines[100], 1, true) ~= nil and last_you ~= nil and last_you > you,
  "the whole reply and a new @You: are in the buffer")
check(wait(5000, function() return vim.api.nvim_win_get_cursor(win)[1] == math.min(last_you + 1, vim.api.nvim_buf_line_count(buf)) end),
  "the cursor lands under the new @You:", string.format("cursor %d, @You: %s", vim.api.nvim_win_get_cursor(win)[1], tostring(last_you)))
check(#vim.api.nvim_buf_get_extmarks(buf, live.ns_progress, 0, -1, {}) == 0, "the progress line is gone")
local usage_win = live.usage_window(buf)
local finished = event("request:finished")
local cost = finished and finished.data.costUsd
local usage_text = usage_win and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(usage_win), 0, -1, false)[1] or ""
check(type(cost) == "number" and usage_text:find(string.format("$%.4f", cost), 1, true) ~= nil,
  "after the reply a usage line shows the cost the server reported (" .. tostring(cost) .. ")",
  vim.inspect({ shown = usage_text, line = live.usage_line(buf), win = usage_win }))
check(usage_text:find("claude-sonnet-4-5 (anthropic)", 1, true) ~= nil and usage_text:find("94%", 1, true) ~= nil
    and usage_text:find("2,168↑ 57↓", 1, true) ~= nil and usage_text:find("Σ1 ", 1, true) ~= nil,
  "it names the model, the cache share, the tokens and the session's total", usage_text)
check(usage_win ~= nil and vim.api.nvim_win_get_config(usage_win).focusable == false
    and vim.api.nvim_get_current_win() == win,
  "the usage line is a float that takes no focus")
local thinking = line_of(buf, "<thinking")
check(thinking ~= nil and wait(5000, function() return vim.fn.foldclosed(thinking) == thinking end),
  "the reply's thinking is folded", tostring(thinking))
check(thinking ~= nil and vim.fn.foldtextresult(thinking) == "<thinking anthropic> … </thinking> (4 lines)",
  "its fold shows the server's preview", thinking and vim.fn.foldtextresult(thinking))

-- 4. A reply with two calls that ask for approval, sent with :Flemma send: the cursor on the
-- first, each previewed under its placeholder; pending calls are hints, not errors; <M-a>
-- approves, <M-r> rejects with a reason, and the cycle goes on.
T.queue_turns({
  { steps = {
    { text = "Two commands." },
    { tool_call = { name = "bash", input = { label = "list numbers", command = "seq 1 3" } } },
    { tool_call = { name = "bash", input = { label = "clean the build", command = "rm -rf build" } } },
  } },
  { steps = { { text = "Counted to three, and left the build alone." } } },
})
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "Now run two commands." })
vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
local stops = #vim.tbl_filter(function(e) return e.name == "engine:stopped" end, events)
vim.cmd("Flemma send")
check(wait(30000, function() return event("engine:stopped", stops + 1) ~= nil end), "the engine stops for approval")
local stopped = event("engine:stopped", stops + 1)
check(stopped and stopped.data.reason == "awaiting-approval", "… awaiting approval", vim.inspect(stopped))
local first = line_of(buf, "**Tool Result:** `")
for n, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if line:find("(pending)", 1, true) and line:find("**Tool Result:**", 1, true) then
    first = n
    break
  end
end
check(wait(5000, function() return vim.api.nvim_win_get_cursor(win)[1] == first end),
  "the cursor lands on the first pending call", string.format("cursor %d, first pending %s", vim.api.nvim_win_get_cursor(win)[1], tostring(first)))
local preview = ""
check(wait(5000, function()
  local found = marks(buf, live.ns_preview, first - 1)
  preview = found[1] and virt_text(found[1]) or ""
  return preview:find("$ seq 1 3", 1, true) ~= nil
end), "the pending call's command is previewed under its placeholder", preview)
check(preview:find("<M-a> approve · <M-r> reject · <M-A> approve all", 1, true) ~= nil,
  "with the keys that answer it", preview)
local second = nil
for n, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if n > first and line:find("(pending)", 1, true) then
    second = n
    break
  end
end
check(second ~= nil and #marks(buf, live.ns_preview, second - 1) > 0
    and virt_text(marks(buf, live.ns_preview, second - 1)[1]):find("$ rm -rf build", 1, true) ~= nil,
  "every pending call is previewed")
local function pending_diagnostics()
  return vim.tbl_filter(function(d) return d.message:find("waiting for approval", 1, true) ~= nil end,
    vim.diagnostic.get(buf))
end
check(wait(5000, function() return #pending_diagnostics() == 2 end)
    and vim.tbl_isempty(vim.tbl_filter(function(d) return d.severity ~= vim.diagnostic.severity.HINT end, pending_diagnostics())),
  "pending calls are hints, not errors", vim.inspect(pending_diagnostics()))
local first_id = vim.api.nvim_buf_get_lines(buf, first - 1, first, false)[1]:match("`([^`]+)`")
press("<M-a>")
check(wait(10000, function() return told("flemmad: approved " .. first_id) ~= nil end),
  "<M-a> approves the call under the cursor and says so", vim.inspect(flemmad.history()))
check(wait(10000, function() return line_of(buf, "**Tool Result:** `" .. first_id .. "` (approved)") ~= nil end),
  "its placeholder turns approved")
vim.ui.input = function(_, on_confirm) on_confirm("leave the build alone") end
vim.api.nvim_win_set_cursor(win, { second, 0 })
press("<M-r>")
local second_id = vim.api.nvim_buf_get_lines(buf, second - 1, second, false)[1]:match("`([^`]+)`")
check(wait(10000, function() return told("flemmad: rejected " .. second_id .. " with your reason") ~= nil end),
  "<M-r> rejects the other with the reason typed, and says so", vim.inspect(flemmad.history()))
check(wait(30000, function()
  return text(buf):find("Counted to three, and left the build alone.\n\n@You:", 1, true) ~= nil
    and event("engine:stopped", stops + 2) ~= nil
end), "the cycle goes on: the approved call runs, the rejection is sent, the next reply lands", text(buf))
check(text(buf):find("**Tool Result:** `" .. first_id .. "`\n```\n1\n2\n3\n```", 1, true) ~= nil,
  "the approved call's output is its result")
check(text(buf):find("User feedback: leave the build alone", 1, true) ~= nil, "the reason is the rejected call's result")
local result_line = line_of(buf, "**Tool Result:** `" .. first_id .. "`")
check(wait(5000, function() return vim.fn.foldclosed(result_line) == result_line end)
    and vim.fn.foldtextresult(result_line) == "⬢ Tool Result: bash: 1↵2↵3 (6 lines)",
  "the result is folded with its preview", vim.fn.foldtextresult(result_line))
local use_line = line_of(buf, "**Tool Use:** `bash` (`" .. first_id .. "`)")
check(vim.fn.foldclosed(use_line) == use_line
    and vim.fn.foldtextresult(use_line) == "⬡ Tool Use: bash: $ seq 1 3 — list numbers (4 lines)",
  "so is the call", vim.fn.foldtextresult(use_line))
local final_you = nil
for n, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if line == "@You:" then
    final_you = n
  end
end
check(wait(5000, function() return vim.api.nvim_win_get_cursor(win)[1] >= final_you end),
  "the cursor, which answered the last call, follows to the new @You:",
  string.format("cursor %d, @You: %d", vim.api.nvim_win_get_cursor(win)[1], final_you))

-- 5. Moving by message: ]m / [m, and the im / am text objects.
vim.cmd("normal! zR")
vim.api.nvim_win_set_cursor(win, { 1, 0 })
press("]m")
check(vim.api.nvim_win_get_cursor(win)[1] == you, "]m goes to the first message", vim.api.nvim_win_get_cursor(win)[1])
press("]m")
local assistant = line_of(buf, "@Assistant:")
check(vim.api.nvim_win_get_cursor(win)[1] == assistant, "]m again to the next", vim.api.nvim_win_get_cursor(win)[1])
press("[m")
check(vim.api.nvim_win_get_cursor(win)[1] == you, "[m back", vim.api.nvim_win_get_cursor(win)[1])
vim.api.nvim_win_set_cursor(win, { you + 1, 0 })
press('"ayim')
check(vim.fn.getreg("a") == "Count to eighty.\n", "yim yanks the message's text", vim.fn.getreg("a"))
press('"byam')
check(vim.fn.getreg("b"):sub(1, #"@You:\nCount to eighty.\n") == "@You:\nCount to eighty.\n",
  "yam yanks the whole message", vim.fn.getreg("b"))

-- 6. :Flemma: completion, and every subcommand says what it did.
local names = vim.fn.getcompletion("Flemma ", "cmdline")
local missing = {}
for _, name in ipairs({ "send", "cancel", "switch", "mode", "status", "usage", "estimate", "approve", "reject", "autopilot", "jobs" }) do
  if not vim.tbl_contains(names, name) then
    table.insert(missing, name)
  end
end
check(#missing == 0, ":Flemma <Tab> completes its subcommands", "missing " .. vim.inspect(missing) .. " in " .. vim.inspect(names))
check(vim.tbl_contains(vim.fn.getcompletion("Flemma autopilot ", "cmdline"), "off"),
  ":Flemma autopilot <Tab> completes on/off/toggle/status")
check(vim.tbl_contains(vim.fn.getcompletion("Flemma switch ", "cmdline"), "anthropic/claude-sonnet-4-5"),
  ":Flemma switch <Tab> offers the models this session used", vim.inspect(vim.fn.getcompletion("Flemma switch ", "cmdline")))
local function says(command, needle)
  vim.cmd(command)
  return check(wait(10000, function() return told(needle) ~= nil end), ":" .. command .. " says what it did",
    vim.inspect(vim.tbl_map(function(e) return e.message end, flemmad.history())))
end
says("Flemma status", "flemmad: plugin.chat: idle")
says("Flemma usage", "this chat: ")
-- The statusline snippet of docs/context.md: the last request against the model's window.
local meter = flemmad.statusline()
check(meter:match("^context %d+%% of [%d,]+$") ~= nil, "require('flemmad').statusline() gives the context meter", meter)
-- The meter as an inlay hint (issue 34), asked by Neovim's LSP client for the whole chat (Neovim
-- fetches the visible lines only; the meter sits on the last @You: line): the next request's
-- tokens against the model's window (claude-sonnet-4-5: 200,000 in the catalogue) and that
-- request's cost.
local function meter_hint()
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(buf),
    range = { start = { line = 0, character = 0 }, ["end"] = { line = vim.api.nvim_buf_line_count(buf), character = 0 } },
  }
  for _, answer in pairs(vim.lsp.buf_request_sync(buf, "textDocument/inlayHint", params, 5000) or {}) do
    for _, hint in ipairs(answer.result or {}) do
      local label = hint.label
      if type(label) == "table" then
        label = table.concat(vim.tbl_map(function(part) return part.value end, label))
      end
      if label:find("input tokens", 1, true) then
        return label
      end
    end
  end
  return nil
end
check(wait(10000, function() return meter_hint() ~= nil end)
    and meter_hint():match("^≈[%d,]+ / 200,000 input tokens %(") ~= nil
    and meter_hint():find("next request $", 1, true) ~= nil,
  "the context meter is an inlay hint: used / window / the next request's cost",
  tostring(meter_hint()))
says("Flemma jobs", "flemmad: no background job in plugin.chat")
-- (An estimate is of what a send would send: the next question typed, not yet saved.)
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "And how many tokens is all this?" })
says("Flemma estimate", "flemmad: estimate: ")
check(told("flemmad: estimate: ") ~= nil and told("flemmad: estimate: "):find("input tokens", 1, true) ~= nil,
  ":Flemma estimate counts the buffer's tokens with the provider", told("flemmad: estimate: "))
says("Flemma switch anthropic/claude-opus-4-1", "claude-opus-4-1")
check(vim.tbl_contains(vim.fn.getcompletion("Flemma mode ", "cmdline"), "auto-edit"),
  ":Flemma mode <Tab> completes the modes", vim.inspect(vim.fn.getcompletion("Flemma mode ", "cmdline")))
says("Flemma mode ask", "in ask mode from its next send")
says("Flemma status", "ask mode")
says("Flemma mode default", "in default mode from its next send")
says("Flemma autopilot off", "flemmad: autopilot off")
-- With autopilot off (the client's settings), a reply's call gets no placeholder: nothing waits.
T.queue_turns({ { steps = {
  { text = "One more command." },
  { tool_call = { name = "bash", input = { label = "print a word", command = "echo quiet" } } },
} } })
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "Run one more." })
local before_off = #vim.tbl_filter(function(e) return e.name == "engine:stopped" end, events)
vim.cmd("Flemma send")
check(wait(30000, function() return event("engine:stopped", before_off + 1) ~= nil end)
    and text(buf):find("echo quiet", 1, true) ~= nil,
  "a reply with a call arrives with autopilot off")
local after_call = text(buf):sub((text(buf):find("echo quiet", 1, true)))
check(after_call:find("**Tool Result:**", 1, true) == nil,
  "with autopilot off its call gets no placeholder (the setting reached the server)", after_call)
says("Flemma usage:recall", "this chat: ")
says("Flemma approve", "no pending tool call at or above the cursor")

-- 7. Never a hit-enter prompt: no error message, and every line we told fits the screen.
local long = {}
for _, line in ipairs(vim.split(vim.fn.execute("messages"), "\n")) do
  if line:find("flemmad", 1, true) and vim.fn.strdisplaywidth(line) >= vim.o.columns then
    table.insert(long, line)
  end
end
check(vim.v.errmsg == "", "no error message was given (v:errmsg)", vim.v.errmsg)
check(#long == 0, "every message fits on the command line (no hit-enter prompt)", vim.inspect(long))

T.finish()
