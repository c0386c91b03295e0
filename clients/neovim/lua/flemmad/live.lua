-- A chat while the engine works on it (Neovim 0.11 and later), from the server's lifecycle
-- events (`flemma/event`): a progress line at the end of the reply (spinner, characters,
-- elapsed time; the running tool), the window following the reply while the cursor is at its
-- end (moving away breaks off, coming back to the end follows again), the cursor on the new
-- `@You:` or on the first pending call when the reply ends, usage after every reply, and a
-- preview of each pending call under its placeholder.
local M = {}

local flemmad = require("flemmad")
local messages = require("flemmad.messages")

local ns_progress = vim.api.nvim_create_namespace("flemmad.progress")
local ns_preview = vim.api.nvim_create_namespace("flemmad.preview")
M.ns_progress, M.ns_preview = ns_progress, ns_preview

local SPINNER = { "⣾", "⣽", "⣻", "⢿", "⡿", "⣟", "⣯", "⣷" }

-- bufnr -> state: see state()
local buffers = {}

local function state(bufnr)
  local s = buffers[bufnr]
  if s == nil then
    s = {
      cycle = false, -- a driver works on the document (until engine:stopped)
      reply = nil, -- { started, chars } while a reply streams
      tool = nil, -- { name, started } while a tool runs
      follow = {}, -- win -> { mark, line: where the plugin left the cursor; count: lines then }
      model = nil, -- { provider, model } of the last request
      last = nil, -- the last finished request's usage line parts
      totals = nil, -- the document's usage totals
      pending = {}, -- tool id -> { name, input } (tool:approval-required)
      usage_line = nil, -- what the last usage display said
      session = { requests = 0, cost = nil }, -- this chat's requests in this Neovim
      frame = 1,
    }
    buffers[bufnr] = s
  end
  return s
end

function M.state(bufnr)
  return buffers[bufnr]
end

--- Every chat buffer's state, by bufnr.
function M.states()
  return buffers
end

local function windows_of(bufnr)
  return require("flemmad.ui").windows_of(bufnr)
end

-- ---- following the reply -----------------------------------------------------------------

local ns_cursor = vim.api.nvim_create_namespace("flemmad.cursor")

--- Whether `line` counts as the end of a buffer of `count` lines (the last line, or the one
--- before a trailing empty line).
local function at_end(line, count)
  return line >= count - 1
end

--- Remembers where the plugin left `win`'s cursor: its line, and a mark in the text, which
--- moves with the lines the engine inserts above it (the cursor does too), so only the
--- user's moves show.
local function remember(bufnr, win, line, count)
  local s = state(bufnr)
  local old = s.follow[win]
  local ok, mark = pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_cursor, line - 1, 0, { id = old and old.mark or nil })
  s.follow[win] = ok and { mark = mark, line = line, count = count } or nil
end

local function forget(bufnr, win)
  local s = state(bufnr)
  local old = s.follow[win]
  if old then
    pcall(vim.api.nvim_buf_del_extmark, bufnr, ns_cursor, old.mark)
  end
  s.follow[win] = nil
end

local function forget_all(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns_cursor, 0, -1)
  state(bufnr).follow = {}
end

--- Starts following in each window whose cursor is at the end of the buffer (`in_last`: or
--- anywhere in its last message, where a pending call was just answered).
local function start_following(bufnr, in_last)
  forget_all(bufnr)
  state(bufnr).last_count = vim.api.nvim_buf_line_count(bufnr)
  if not flemmad.options().ui.follow then
    return
  end
  local count = vim.api.nvim_buf_line_count(bufnr)
  local known = messages.get(bufnr)
  local last_start = in_last and known[#known] and known[#known].start or math.huge
  for _, win in ipairs(windows_of(bufnr)) do
    local line = vim.api.nvim_win_get_cursor(win)[1]
    if at_end(line, count) or line >= last_start then
      remember(bufnr, win, line, count)
    end
  end
end

--- After a change while the engine works: a following window moves to the new end; one whose
--- cursor the user moved breaks off, unless the user moved it to the end (it follows again).
local function follow(bufnr)
  local s = buffers[bufnr]
  if s == nil or not s.cycle or not flemmad.options().ui.follow or not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local count = vim.api.nvim_buf_line_count(bufnr)
  for _, win in ipairs(windows_of(bufnr)) do
    local line = vim.api.nvim_win_get_cursor(win)[1]
    local followed = s.follow[win]
    local following
    local at_mark = false
    if followed then
      local mark = vim.api.nvim_buf_get_extmark_by_id(bufnr, ns_cursor, followed.mark, {})
      -- Where the plugin left it: moved with the lines inserted above it, or (when the
      -- engine's edit replaced the text around it) still on that line.
      at_mark = (mark[1] ~= nil and mark[1] + 1 == line) or line == followed.line
    end
    if at_mark then
      following = true
    else
      -- The user moved the cursor (or never was at the end): at the end (of the text before
      -- this change), follow again.
      following = at_end(line, s.last_count or count) or at_end(line, count)
    end
    if following then
      if line ~= count then
        vim.api.nvim_win_set_cursor(win, { count, 0 })
      end
      M.show_end(win, count)
      remember(bufnr, win, count, count)
    else
      forget(bufnr, win)
    end
  end
  s.last_count = count
end

--- Scrolls `win` so that the last line and the progress line under it are in view.
function M.show_end(win, count)
  vim.api.nvim_win_call(win, function()
    local height = vim.api.nvim_win_get_height(win)
    local view = vim.fn.winsaveview()
    for _ = 1, 200 do
      local rows = vim.api.nvim_win_text_height(win, { start_row = view.topline - 1, end_row = count - 1 }).all
      if rows <= height or view.topline >= count then
        break
      end
      view.topline = view.topline + math.max(1, math.min(rows - height, count - view.topline))
    end
    view.topfill = 0
    vim.fn.winrestview(view)
  end)
end

--- Whether a window of the buffer still follows the engine's writing.
function M.following(bufnr, win)
  local s = buffers[bufnr]
  return s ~= nil and s.follow[win or vim.api.nvim_get_current_win()] ~= nil
end

-- ---- the progress line -------------------------------------------------------------------

local function elapsed(started)
  return string.format("%ds", math.floor((vim.uv.hrtime() - started) / 1e9))
end

--- The progress line's text, or nil when nothing runs.
function M.progress_text(bufnr)
  local s = buffers[bufnr]
  if s == nil then
    return nil
  end
  local spin = SPINNER[s.frame]
  if s.tool then
    return string.format("%s running %s · %s", spin, s.tool.name, elapsed(s.tool.started))
  elseif s.reply then
    return string.format("%s %s characters · %s", spin, flemmad.thousands(s.reply.chars), elapsed(s.reply.started))
  elseif s.cycle then
    return spin .. " working"
  end
  return nil
end

local function draw_progress(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local s = buffers[bufnr]
  local text = flemmad.options().ui.progress and M.progress_text(bufnr) or nil
  if text == nil then
    vim.api.nvim_buf_clear_namespace(bufnr, ns_progress, 0, -1)
    if s then
      s.progress_mark = nil
    end
    return
  end
  local last = vim.api.nvim_buf_line_count(bufnr) - 1
  local ok, id = pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_progress, last, 0, {
    id = s.progress_mark,
    virt_lines = { { { text, "FlemmadProgress" } } },
    priority = 200,
  })
  if ok then
    s.progress_mark = id
  end
end

local function stop_timer(s)
  if s.timer then
    s.timer:stop()
    s.timer:close()
    s.timer = nil
  end
end

local function start_timer(bufnr)
  local s = state(bufnr)
  if s.timer then
    return
  end
  s.timer = vim.uv.new_timer()
  s.timer:start(0, 100, vim.schedule_wrap(function()
    local now = buffers[bufnr]
    if now == nil or not now.cycle then
      if now then
        stop_timer(now)
      end
      return
    end
    now.frame = now.frame % #SPINNER + 1
    draw_progress(bufnr)
  end))
end

-- ---- usage -------------------------------------------------------------------------------

local function money(cost)
  if type(cost) ~= "number" then
    return "cost unknown"
  end
  return string.format("$%.4f", cost)
end

--- The last request's share of the model's context window (`context 85% of 200,000`), or nil
--- before a request of a model whose window is known (docs/context.md).
function M.context_line(bufnr)
  local s = buffers[bufnr]
  if s == nil or s.context == nil then
    return nil
  end
  return string.format("context %d%% of %s", math.floor(s.context.used * 100 / s.context.window),
    flemmad.thousands(s.context.window))
end

--- One line: the model, the last request's cost, cache share and tokens, the document's total.
function M.usage_line(bufnr)
  local s = buffers[bufnr]
  if s == nil or s.last == nil then
    return nil
  end
  local parts = {}
  local model = s.model and (tostring(s.model.model) .. " (" .. tostring(s.model.provider) .. ")") or "model unknown"
  table.insert(parts, model)
  local usage = type(s.last.usage) == "table" and s.last.usage or {}
  local input = usage.input_tokens or 0
  local request = money(s.last.cost)
  if (usage.cache_read_tokens or 0) > 0 and input > 0 then
    request = request .. string.format(" %d%%", math.floor(usage.cache_read_tokens * 100 / input + 0.5))
  end
  request = request .. string.format(" %s↑ %s↓", flemmad.thousands(input), flemmad.thousands(usage.output_tokens or 0))
  table.insert(parts, request)
  if s.session.requests > 0 then
    table.insert(parts, string.format("Σ%d %s", s.session.requests, money(s.session.cost)))
  end
  return table.concat(parts, " │ ")
end

local function close_usage(s)
  if s.usage_win and vim.api.nvim_win_is_valid(s.usage_win) then
    pcall(vim.api.nvim_win_close, s.usage_win, true)
  end
  s.usage_win = nil
end

--- Shows the usage line as configured (`usage.show`): a float at the top right of the
--- chat's window for `usage.timeout` ms, or vim.notify.
function M.show_usage(bufnr)
  local s = buffers[bufnr]
  local line = M.usage_line(bufnr)
  if s == nil or line == nil then
    return
  end
  s.usage_line = line
  local how = flemmad.options().usage
  local show = type(how) == "table" and how.show or how
  if show == "notify" then
    flemmad.notify(line)
    return
  elseif show ~= "float" then
    return
  end
  local win = windows_of(bufnr)[1]
  if win == nil then
    return
  end
  close_usage(s)
  local text = " " .. line .. " "
  local width = math.min(vim.fn.strdisplaywidth(text), vim.api.nvim_win_get_width(win))
  local scratch = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(scratch, 0, -1, false, { text })
  vim.bo[scratch].bufhidden = "wipe"
  s.usage_win = vim.api.nvim_open_win(scratch, false, {
    relative = "win",
    win = win,
    anchor = "NE",
    row = 0,
    col = vim.api.nvim_win_get_width(win),
    width = width,
    height = 1,
    style = "minimal",
    focusable = false,
    noautocmd = true,
    zindex = 60,
  })
  vim.wo[s.usage_win].winhighlight = "Normal:FlemmadUsage"
  local shown = s.usage_win
  vim.defer_fn(function()
    if s.usage_win == shown then
      close_usage(s)
    end
  end, type(how) == "table" and how.timeout or 10000)
end

--- The usage window shown after the last reply (nil when none is open).
function M.usage_window(bufnr)
  local s = buffers[bufnr]
  return s and s.usage_win and vim.api.nvim_win_is_valid(s.usage_win) and s.usage_win or nil
end

-- ---- pending calls -----------------------------------------------------------------------

local PREVIEW_LINES = 12

--- The lines previewing a call: the command of `bash`, the diff of `edit`, the content of
--- `write`, else the input.
function M.preview_lines(name, input)
  local out = {}
  local function add(text, group)
    for _, line in ipairs(vim.split(tostring(text), "\n", { plain = true })) do
      if #out >= PREVIEW_LINES then
        if out[#out][1][1] ~= "    …" then
          table.insert(out, { { "    …", "FlemmadPreview" } })
        end
        return
      end
      table.insert(out, { { "    " .. line, group or "FlemmadPreview" } })
    end
  end
  input = type(input) == "table" and input or {}
  if name == "bash" and input.command then
    add("$ " .. input.command)
  elseif name == "edit" then
    add(tostring(input.path or "?"))
    local edits = type(input.edits) == "table" and input.edits or {}
    if input.oldText then
      edits = { { old = input.oldText, new = input.newText or "" } }
    end
    for _, edit in ipairs(edits) do
      for _, line in ipairs(vim.split(tostring(edit.old or ""), "\n", { plain = true })) do
        add("- " .. line, "FlemmadPreviewDelete")
      end
      for _, line in ipairs(vim.split(tostring(edit.new or ""), "\n", { plain = true })) do
        add("+ " .. line, "FlemmadPreviewAdd")
      end
    end
  elseif name == "write" then
    local content = tostring(input.content or "")
    local count = select(2, content:gsub("\n", "")) + ((content ~= "" and content:sub(-1) ~= "\n") and 1 or 0)
    add(string.format("%s (%d line%s)", tostring(input.path or "?"), count, count == 1 and "" or "s"))
    for _, line in ipairs(vim.split(content:gsub("\n$", ""), "\n", { plain = true })) do
      add("+ " .. line, "FlemmadPreviewAdd")
    end
  else
    local shown = vim.deepcopy(input)
    shown.label = nil
    add(name .. " " .. vim.json.encode(shown))
  end
  return out
end

--- Draws the preview of each pending call the server told about, under its placeholder's
--- header, with the keys that answer it.
function M.draw_previews(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  vim.api.nvim_buf_clear_namespace(bufnr, ns_preview, 0, -1)
  local s = buffers[bufnr]
  if s == nil or not flemmad.options().ui.pending_preview then
    return
  end
  local keys = flemmad.options().keys
  local hint = {}
  for _, pair in ipairs({ { keys.approve, "approve" }, { keys.reject, "reject" }, { keys.approve_all, "approve all" } }) do
    if pair[1] then
      table.insert(hint, pair[1] .. " " .. pair[2])
    end
  end
  for _, message in ipairs(messages.get(bufnr)) do
    for _, result in ipairs(message.results) do
      local call = s.pending[result.id]
      if result.status == "pending" and call then
        local header = vim.api.nvim_buf_get_lines(bufnr, result.line - 1, result.line, false)[1] or ""
        if header:find(result.id, 1, true) then
          local lines = M.preview_lines(call.name, call.input)
          if #hint > 0 then
            table.insert(lines, { { "    " .. table.concat(hint, " · "), "FlemmadPreview" } })
          end
          pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_preview, result.line - 1, 0, {
            virt_lines = lines,
          })
        end
      end
    end
  end
end

-- ---- landing -------------------------------------------------------------------------------

--- The line of the placeholder of the call `id` while it waits for approval, or nil.
local function placeholder_line(bufnr, id)
  local needle = "**Tool Result:** `" .. id .. "`"
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for n = #lines, 1, -1 do
    if lines[n]:sub(1, #needle) == needle then
      return lines[n]:find("(pending", #needle, true) and n or nil
    end
  end
  return nil
end

--- Where the cursor goes when the engine stops: the first pending call's placeholder when
--- it waits for approval, else the line under the last `@You:`.
function M.landing(bufnr, reason, tool_ids)
  if reason == "awaiting-approval" then
    for _, id in ipairs(tool_ids or {}) do
      local line = placeholder_line(bufnr, id)
      if line then
        return line
      end
    end
  end
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for n = #lines, 1, -1 do
    if lines[n]:match("^@You:%s*$") then
      return math.min(n + 1, #lines)
    end
  end
  return #lines
end

local function land(bufnr, reason, tool_ids)
  local s = buffers[bufnr]
  if s == nil or not flemmad.options().ui.land then
    return
  end
  local line = M.landing(bufnr, reason, tool_ids)
  local last = vim.api.nvim_buf_line_count(bufnr)
  for _, win in ipairs(windows_of(bufnr)) do
    if s.follow[win] then
      vim.api.nvim_win_set_cursor(win, { line, 0 })
      vim.api.nvim_win_call(win, function()
        -- At the end: the reply above it in view, not empty lines below.
        vim.cmd(line >= last - 1 and "normal! zvzb" or "normal! zv")
      end)
    end
  end
end

-- ---- events --------------------------------------------------------------------------------

local function buffer_of(uri)
  local ok, name = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  local bufnr = vim.fn.bufnr(name)
  if bufnr == -1 or not vim.api.nvim_buf_is_loaded(bufnr) then
    return nil
  end
  return bufnr
end

local function begin_cycle(bufnr)
  local s = state(bufnr)
  if not s.cycle then
    s.cycle = true
    s.cycle_started = vim.uv.hrtime()
    -- A command the user just gave decided already where the cursor follows.
    if not s.follow_decided then
      start_following(bufnr)
    end
    s.follow_decided = nil
  end
  start_timer(bufnr)
end

local handlers = {}

handlers["request:sending"] = function(bufnr, data)
  local s = state(bufnr)
  begin_cycle(bufnr)
  s.model = { provider = data.provider, model = data.model }
  s.reply = { started = vim.uv.hrtime(), chars = 0 }
  s.tool = nil
  draw_progress(bufnr)
end

handlers["request:finished"] = function(bufnr, data)
  local s = state(bufnr)
  s.reply = nil
  s.last = { usage = data.usage, cost = data.costUsd, status = data.status }
  -- The session's total: every request of this chat in this Neovim (a driver's own totals
  -- start again with each send).
  s.session.requests = s.session.requests + 1
  if type(data.costUsd) == "number" then
    s.session.cost = (s.session.cost or 0) + data.costUsd
  end
  draw_progress(bufnr)
  if s.first_line then
    require("flemmad.ui").close_blocks(bufnr, s.first_line)
  end
end

handlers["usage:updated"] = function(bufnr, data)
  local s = state(bufnr)
  s.totals = { usage = data.usage, requests = data.requests, cost = data.costUsd }
  if type(data.contextWindow) == "number" and data.contextWindow > 0 then
    s.context = { used = data.contextTokens or 0, window = data.contextWindow }
  end
  if s.last and s.last.status == "completed" then
    M.show_usage(bufnr)
  end
end

handlers["tool:executing"] = function(bufnr, data)
  local s = state(bufnr)
  begin_cycle(bufnr)
  s.pending[data.toolId or ""] = nil
  s.tool = { name = data.toolName or "a tool", started = vim.uv.hrtime() }
  draw_progress(bufnr)
end

handlers["tool:completed"] = function(bufnr)
  local s = state(bufnr)
  s.tool = nil
  draw_progress(bufnr)
end

handlers["job:submitted"] = handlers["tool:completed"]

handlers["tool:approval-required"] = function(bufnr, data)
  local s = state(bufnr)
  for _, tool in ipairs(type(data.tools) == "table" and data.tools or {}) do
    if tool.toolId then
      s.pending[tool.toolId] = { name = tool.toolName, input = tool.input }
    end
  end
  s.waiting = vim.tbl_map(function(tool)
    return tool.toolId
  end, type(data.tools) == "table" and data.tools or {})
  messages.refresh(bufnr)
end

handlers["engine:stopped"] = function(bufnr, data)
  local s = state(bufnr)
  local reason = data.reason
  -- A driver that did no work (an approval while another call still waits) ends without a
  -- cycle: the cursor and what the user's last answer decided stay.
  if s.cycle then
    land(bufnr, reason, reason == "awaiting-approval" and s.waiting or nil)
    forget_all(bufnr)
    s.follow_decided = nil
  end
  s.cycle, s.reply, s.tool = false, nil, nil
  stop_timer(s)
  draw_progress(bufnr)
  -- What the cycle wrote arrives folded as when the chat was opened.
  if s.first_line then
    require("flemmad.ui").close_blocks(bufnr, s.first_line)
    s.first_line = nil
  end
  if reason == "error" or reason == "refused" then
    flemmad.notify(
      (reason == "refused" and "the model refused to answer" or "the reply failed")
        .. (data.message and (": " .. data.message) or ""),
      vim.log.levels.ERROR
    )
  elseif reason == "max-turns" then
    flemmad.notify("autopilot stopped after its maximum number of turns", vim.log.levels.WARN)
  end
end

--- A `flemma/event` notification.
function M.on_event(params)
  local bufnr = type(params.uri) == "string" and buffer_of(params.uri) or nil
  local handler = handlers[params.name]
  if bufnr == nil or handler == nil then
    return
  end
  handler(bufnr, type(params.data) == "table" and params.data or {})
end

--- After a command the user gave (the cursor at the end now starts following the reply).
function M.after_command(bufnr, command)
  local answers = { ["flemma.approve"] = true, ["flemma.approveAll"] = true, ["flemma.reject"] = true }
  if command == "flemma.send" or answers[command] then
    local s = state(bufnr)
    -- Before the engine's first event, or just after it (the answer may come second).
    local just_begun = s.cycle and s.cycle_started and (vim.uv.hrtime() - s.cycle_started) < 2e9
    if not s.cycle or just_begun then
      start_following(bufnr, answers[command])
      s.follow_decided = not s.cycle
    end
  end
end

--- The characters a change (`on_bytes`) inserted.
local function inserted_chars(buf, start_row, start_col, new_row, new_col)
  if new_row == 0 and new_col == 0 then
    return 0
  end
  local end_col = (new_row == 0 and start_col or 0) + new_col
  local ok, inserted = pcall(vim.api.nvim_buf_get_text, buf, start_row, start_col, start_row + new_row, end_col, {})
  if ok then
    return vim.fn.strchars(table.concat(inserted, "\n"))
  end
  -- Whole lines added at the end of the buffer end past its last line.
  local lines = vim.api.nvim_buf_get_lines(buf, start_row, start_row + new_row, false)
  if lines[1] then
    lines[1] = lines[1]:sub(start_col + 1)
  end
  return vim.fn.strchars(table.concat(lines, "\n")) + 1
end

--- Counts what the engine writes and follows it.
function M.attach(bufnr)
  state(bufnr)
  vim.api.nvim_buf_attach(bufnr, false, {
    on_bytes = function(_, buf, _, start_row, start_col, _, _, _, _, new_row, new_col, _)
      local s = buffers[buf]
      if s == nil then
        return true -- detached
      end
      if not s.cycle then
        return
      end
      s.first_line = math.min(s.first_line or math.huge, start_row + 1)
      if s.reply then
        s.reply.chars = s.reply.chars + inserted_chars(buf, start_row, start_col, new_row, new_col)
      end
      vim.schedule(function()
        follow(buf)
      end)
    end,
  })
end

function M.detach(bufnr)
  local s = buffers[bufnr]
  if s then
    stop_timer(s)
    close_usage(s)
  end
  buffers[bufnr] = nil
end

return M
