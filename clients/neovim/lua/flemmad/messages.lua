-- The messages of a chat buffer as the server sees them (its document symbols: each message's
-- lines, its tool results with their status), kept per buffer and refreshed after changes; and
-- what is built on them: `]m` / `[m`, the `im` / `am` text objects. Neovim 0.11 and later.
local M = {}

local flemmad = require("flemmad")

-- bufnr -> { tick = changedtick the messages are of, messages = { … }, waiting = bool }
local cache = {}
-- Called with the bufnr after each refresh (the UI redraws rulers, the turn, previews).
local listeners = {}

-- The LSP symbol kinds the server gives a message and a tool result (the other blocks of a
-- message — thinking, tool uses, job results — are its other children).
local NAMESPACE = 3
local RESULT = 24 -- Event

--- `{ start, finish, role, results = { { id, status, line } }, blocks = { { line, waiting } } }`
--- for each message symbol; lines are 1-based, `finish` is the message's last line (its
--- trailing blank lines included).
local function parse(symbols)
  local out = {}
  for _, symbol in ipairs(symbols or {}) do
    if symbol.kind == NAMESPACE and type(symbol.name) == "string" then
      local range = symbol.range
      local finish = range["end"].line + 1
      if range["end"].character == 0 and range["end"].line > range.start.line then
        finish = range["end"].line
      end
      local message = {
        start = range.start.line + 1,
        finish = finish,
        role = symbol.name:match("^@(.-):$") or symbol.name,
        results = {},
      }
      message.blocks = {}
      for _, child in ipairs(symbol.children or {}) do
        local line = child.selectionRange.start.line + 1
        local id = type(child.name) == "string" and child.name:match("^result (.+)$")
        if child.kind == RESULT and id then
          table.insert(message.results, { id = id, status = child.detail, line = line })
        end
        table.insert(message.blocks, {
          line = line,
          -- A call still waiting (or approved, not run yet) is no block to close.
          waiting = child.kind == RESULT and (child.detail == "pending" or child.detail == "approved"),
        })
      end
      table.insert(out, message)
    end
  end
  return out
end

local function params(bufnr)
  return { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }
end

local function buffer(bufnr)
  return (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
end

--- The messages of `bufnr` as last known (possibly of an older text), or {}.
function M.get(bufnr)
  local entry = cache[buffer(bufnr)]
  return entry and entry.messages or {}
end

--- Whether the known messages are of the buffer's current text.
function M.current(bufnr)
  local entry = cache[bufnr]
  return entry ~= nil and entry.tick == vim.api.nvim_buf_get_changedtick(bufnr)
end

-- When the user last pressed a key: the messages of a big chat are a big answer to decode, so
-- they are asked for when the user pauses, never between two keys.
local last_key = 0
vim.on_key(function()
  last_key = vim.uv.hrtime()
end, vim.api.nvim_create_namespace("flemmad.keys"))
local PAUSE_NS = 300 * 1e6

--- Asks the server for the buffer's messages (one request at a time; a change meanwhile asks
--- again when the answer comes), once the user pauses typing.
function M.refresh(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local entry = cache[bufnr] or { messages = {} }
  cache[bufnr] = entry
  if vim.uv.hrtime() - last_key < PAUSE_NS then
    M.schedule(bufnr, 300)
    return
  end
  if entry.waiting then
    entry.again = true
    return
  end
  local client = flemmad.client(bufnr)
  if client == nil then
    return
  end
  entry.waiting = true
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  client:request("textDocument/documentSymbol", params(bufnr), function(err, result)
    entry.waiting = false
    if not err and vim.api.nvim_buf_is_valid(bufnr) then
      entry.messages = parse(result)
      entry.tick = tick
      for _, listener in ipairs(listeners) do
        pcall(listener, bufnr)
      end
    end
    if entry.again or (vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_buf_get_changedtick(bufnr) ~= tick) then
      entry.again = false
      M.schedule(bufnr)
    end
  end, bufnr)
end

--- Refreshes the messages after a change, soon: not while the user types in insert mode (when
--- they leave it), at most every `delay` ms (longer while the engine writes the buffer), so a
--- big chat costs no request per key.
function M.schedule(bufnr, delay)
  local entry = cache[bufnr] or { messages = {} }
  cache[bufnr] = entry
  local mode = vim.api.nvim_get_mode().mode
  if mode:sub(1, 1) == "i" or mode:sub(1, 1) == "R" then
    entry.dirty = true
    return
  end
  if entry.timer then
    return
  end
  entry.timer = true
  vim.defer_fn(function()
    entry.timer = nil
    M.refresh(bufnr)
  end, delay or 150)
end

--- After insert mode: the refresh put off while typing.
function M.insert_left(bufnr)
  local entry = cache[bufnr]
  if entry and entry.dirty then
    entry.dirty = false
    M.schedule(bufnr)
  end
end

--- The messages of the buffer's current text, asking the server now when they are older
--- (for motions: up to one second).
function M.now(bufnr)
  if M.current(bufnr) then
    return M.get(bufnr)
  end
  local client = flemmad.client(bufnr)
  if client ~= nil then
    local tick = vim.api.nvim_buf_get_changedtick(bufnr)
    local answer = client:request_sync("textDocument/documentSymbol", params(bufnr), 1000, bufnr)
    if answer and answer.result then
      cache[bufnr] = cache[bufnr] or {}
      cache[bufnr].messages = parse(answer.result)
      cache[bufnr].tick = tick
    end
  end
  return M.get(bufnr)
end

function M.on_refresh(listener)
  table.insert(listeners, listener)
end

function M.forget(bufnr)
  cache[bufnr] = nil
end

--- The message holding `line` (1-based), or nil (a binary search: messages are in order).
function M.at(bufnr, line)
  local list = M.get(bufnr)
  local low, high = 1, #list
  while low <= high do
    local mid = math.floor((low + high) / 2)
    local message = list[mid]
    if line < message.start then
      high = mid - 1
    elseif line > message.finish then
      low = mid + 1
    else
      return message
    end
  end
  return nil
end

--- The first call of the buffer waiting for approval (the line of its placeholder), or nil.
function M.first_pending(bufnr)
  for _, message in ipairs(M.get(bufnr)) do
    for _, result in ipairs(message.results) do
      if result.status == "pending" then
        return result
      end
    end
  end
  return nil
end

--- `]m` (direction 1) / `[m` (-1): to the start of the next / previous message, `count` times.
function M.jump(bufnr, direction, count)
  local messages = M.now(bufnr)
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local target = nil
  for _ = 1, math.max(count or 1, 1) do
    local found = nil
    if direction > 0 then
      for _, message in ipairs(messages) do
        if message.start > line then
          found = message.start
          break
        end
      end
    else
      for n = #messages, 1, -1 do
        if messages[n].start < line then
          found = messages[n].start
          break
        end
      end
    end
    if found == nil then
      break
    end
    target, line = found, found
  end
  if target then
    vim.cmd("normal! m'")
    vim.api.nvim_win_set_cursor(0, { target, 0 })
  end
end

--- Selects the message under the cursor, linewise: `inner` its text (without the role line
--- and the blank lines after it), else all of it.
function M.select(bufnr, inner)
  M.now(bufnr)
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local message = M.at(bufnr, line)
  if message == nil then
    return
  end
  local first, last = message.start, message.finish
  if inner then
    first = math.min(message.start + 1, message.finish)
    local lines = vim.api.nvim_buf_get_lines(bufnr, first - 1, last, false)
    while last > first and vim.trim(lines[last - first + 1] or "") == "" do
      last = last - 1
    end
  end
  local mode = vim.fn.mode()
  if mode == "v" or mode == "V" or mode == "\22" then
    vim.cmd("normal! \27")
  end
  vim.api.nvim_win_set_cursor(0, { first, 0 })
  vim.cmd("normal! V")
  vim.api.nvim_win_set_cursor(0, { last, 0 })
end

function M.map_keys(bufnr, keys)
  local function map(modes, lhs, rhs, desc)
    if lhs then
      vim.keymap.set(modes, lhs, rhs, { buffer = bufnr, desc = "flemmad: " .. desc })
    end
  end
  map({ "n", "x", "o" }, keys.message_next, function()
    M.jump(bufnr, 1, vim.v.count1)
  end, "next message")
  map({ "n", "x", "o" }, keys.message_prev, function()
    M.jump(bufnr, -1, vim.v.count1)
  end, "previous message")
  if keys.text_object then
    map({ "x", "o" }, "i" .. keys.text_object, function()
      M.select(bufnr, true)
    end, "inner message")
    map({ "x", "o" }, "a" .. keys.text_object, function()
      M.select(bufnr, false)
    end, "a message")
  end
end

return M
