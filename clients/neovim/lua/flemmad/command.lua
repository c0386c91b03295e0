-- `:Flemma {subcommand}` with completion (Neovim 0.11 and later), for what Flemma users type:
-- send, cancel, switch, mode, status, usage, estimate, approve, reject, approve-all, background,
-- execute, autopilot, jobs, messages, review, approve-hunks, changes, rewind. Flemma's own spellings (`usage:recall`,
-- `usage:estimate`, `tool:approve`, `tool:reject`, `tool:approve-all`, `autopilot:enable`, …)
-- work too. Every subcommand says what it did.
local M = {}

local flemmad = require("flemmad")

local PROVIDERS = { "anthropic", "openai", "openai-compatible", "moonshot", "gemini", "vertex" }

-- Models this Neovim has seen (the requests' models, the switches), for `switch` completion.
local seen_models = {}

local function chat_buffer()
  local bufnr = vim.api.nvim_get_current_buf()
  if vim.bo[bufnr].filetype ~= flemmad.options().filetype then
    flemmad.notify("not a chat buffer (filetype " .. flemmad.options().filetype .. ")", vim.log.levels.WARN)
    return nil
  end
  return bufnr
end

local function pending_or_cursor(bufnr, id)
  return id or flemmad.tool_id_at(bufnr, vim.api.nvim_win_get_cursor(0)[1], true)
end

--- The client's settings, with the autopilot set as asked (`nil` leaves it).
local autopilot = nil

local function send_settings(bufnr)
  local client = flemmad.client(bufnr)
  if client == nil then
    flemmad.notify("the language server is not running for this buffer", vim.log.levels.ERROR)
    return false
  end
  local base = client.config.init_options
  local settings = vim.deepcopy(type(base) == "table" and base or {})
  if autopilot ~= nil then
    settings.tools = type(settings.tools) == "table" and settings.tools or {}
    settings.tools.autopilot = type(settings.tools.autopilot) == "table" and settings.tools.autopilot or {}
    settings.tools.autopilot.enabled = autopilot
  end
  client.settings = vim.tbl_deep_extend("force", client.settings or {}, { flemmad = { config = settings } })
  client:notify("workspace/didChangeConfiguration", { settings = { flemmad = { config = settings } } })
  return true
end

local function usage_now(bufnr)
  local live = require("flemmad.live")
  flemmad.ask("flemma.usage", bufnr, {}, function(totals)
    local last = live.usage_line(bufnr)
    local parts = {}
    if last then
      table.insert(parts, "last reply: " .. last)
    end
    if type(totals) == "table" then
      local cost = type(totals.cost) == "number" and string.format(", $%.4f", totals.cost) or ""
      table.insert(parts, string.format(
        "this chat: %s input (%s from cache), %s output tokens%s",
        flemmad.thousands(totals.inputTokens),
        flemmad.thousands(totals.cacheReadTokens),
        flemmad.thousands(totals.outputTokens),
        cost
      ))
    end
    flemmad.notify(#parts > 0 and table.concat(parts, " · ") or "no request in this session yet")
  end)
end

local function estimate(bufnr)
  local flemmad_bin = flemmad.flemmad_command(bufnr)
  if flemmad_bin == nil then
    flemmad.notify("no flemmad command to count with", vim.log.levels.ERROR)
    return
  end
  local path = vim.api.nvim_buf_get_name(bufnr)
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
  flemmad.notify("counting " .. vim.fn.fnamemodify(path, ":t") .. "…")
  vim.system({ flemmad_bin, "count", "--stdin", path }, { stdin = text, text = true }, function(done)
    vim.schedule(function()
      local out = vim.trim(done.stdout or "")
      if done.code == 0 and out ~= "" then
        flemmad.notify("estimate: " .. out)
      else
        local why = vim.trim(done.stderr or "")
        why = why:match("([^\n]*)$") or why
        flemmad.notify("estimate failed: " .. (why ~= "" and why or ("exit " .. tostring(done.code))), vim.log.levels.ERROR)
      end
    end)
  end)
end

local function jobs(bufnr)
  flemmad.ask("flemma.jobs", bufnr, {}, function(answer)
    local list = type(answer) == "table" and answer.jobs or {}
    if #list == 0 then
      flemmad.notify("no background job in " .. vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ":t"))
      return
    end
    local parts = {}
    for _, job in ipairs(list) do
      table.insert(parts, string.format("%s (%s, %s)", tostring(job.jobId), tostring(job.toolName), tostring(job.state)))
    end
    flemmad.notify("jobs: " .. table.concat(parts, ", "))
  end)
end

local function show_messages()
  local lines = {}
  for _, entry in ipairs(flemmad.history()) do
    local level = ({ [vim.log.levels.ERROR] = "error", [vim.log.levels.WARN] = "warn" })[entry.level] or "info"
    table.insert(lines, level .. ": " .. entry.message)
  end
  if #lines == 0 then
    lines = { "(no message yet)" }
  end
  flemmad.scratch_split("flemmad messages", lines)
end

--- The subcommands: each `run(bufnr, args)`; `complete(arglead)` for its argument.
local commands = {}

commands.send = { run = function(b) flemmad.execute("flemma.send", b) end }
commands.cancel = { run = function(b) flemmad.execute("flemma.cancel", b) end }
commands.status = { run = function(b) flemmad.show_status(b) end }
commands.usage = { run = usage_now }
commands.estimate = { run = estimate }
commands.jobs = { run = jobs }
commands.messages = { run = show_messages, anywhere = true }
--- Runs `run(id)` on the pending call `args[1]`, else the one at or above the cursor.
local function on_pending(b, args, run)
  local id = pending_or_cursor(b, args[1])
  if id == nil then
    flemmad.notify("no pending tool call at or above the cursor", vim.log.levels.WARN)
    return
  end
  run(id)
end
commands.approve = {
  run = function(b, args)
    on_pending(b, args, function(id)
      flemmad.execute("flemma.approve", b, id)
    end)
  end,
}
commands.review = {
  run = function(b, args)
    on_pending(b, args, function(id)
      require("flemmad.review").open(b, id)
    end)
  end,
}
--- The tool call `args[1]`, else the one at or above the cursor.
local function call_or_cursor(b, args)
  return args[1] or flemmad.tool_id_at(b, vim.api.nvim_win_get_cursor(0)[1], false)
end
--- Runs `run(id)` on the tool call `args[1]`, else the one at or above the cursor.
local function on_call(b, args, run)
  local id = call_or_cursor(b, args)
  if id == nil then
    flemmad.notify("no tool call at or above the cursor", vim.log.levels.WARN)
    return
  end
  run(id)
end
-- Every call's changes when the cursor is on no call.
commands.changes = {
  run = function(b, args)
    require("flemmad.changes").show(b, call_or_cursor(b, args))
  end,
}
commands.rewind = {
  run = function(b, args)
    on_call(b, args, function(id)
      require("flemmad.changes").rewind(b, id)
    end)
  end,
}
-- In a proposal's buffer too (it names its chat and call).
commands["approve-hunks"] = {
  run = function(_, args)
    require("flemmad.review").approve_hunks(args)
  end,
  anywhere = true,
}
commands["approve-all"] = { run = function(b) flemmad.execute("flemma.approveAll", b) end }
commands.reject = {
  run = function(b, args)
    local id = pending_or_cursor(b, nil)
    if id == nil then
      flemmad.notify("no pending tool call at or above the cursor", vim.log.levels.WARN)
      return
    end
    if #args > 0 then
      flemmad.execute("flemma.reject", b, id, table.concat(args, " "))
    else
      flemmad.reject(b, id)
    end
  end,
}
commands.background = {
  run = function(b, args)
    on_call(b, args, function(id)
      flemmad.execute("flemma.background", b, id)
    end)
  end,
}
commands.execute = {
  run = function(b, args)
    on_call(b, args, function(id)
      flemmad.execute("flemma.execute", b, id)
    end)
  end,
}
commands.mode = {
  run = function(b, args)
    if args[1] == nil then
      flemmad.notify("which mode? :Flemma mode ask|default|auto-edit", vim.log.levels.WARN)
      return
    end
    flemmad.execute("flemma.mode", b, args[1])
  end,
  complete = function(arglead)
    return vim.tbl_filter(function(mode)
      return vim.startswith(mode, arglead)
    end, { "ask", "default", "auto-edit" })
  end,
}
commands.switch = {
  run = function(b, args)
    if args[1] == nil then
      flemmad.notify("switch to which model? :Flemma switch provider/model (or a model name)", vim.log.levels.WARN)
      return
    end
    seen_models[args[1]] = true
    flemmad.execute("flemma.switch", b, args[1])
  end,
  complete = function(arglead)
    local out = {}
    for _, provider in ipairs(PROVIDERS) do
      table.insert(out, provider .. "/")
    end
    for model in pairs(seen_models) do
      table.insert(out, model)
    end
    for _, s in pairs(require("flemmad.live").states()) do
      if s.model and s.model.model then
        table.insert(out, tostring(s.model.provider) .. "/" .. tostring(s.model.model))
      end
    end
    table.sort(out)
    return vim.tbl_filter(function(item)
      return vim.startswith(item, arglead)
    end, vim.fn.uniq(out))
  end,
}
commands.autopilot = {
  run = function(b, args)
    local what = args[1] or "status"
    if what == "status" then
      local state = autopilot == nil and "as configured (on unless your config or the chat turns it off)"
        or (autopilot and "on" or "off")
      flemmad.notify("autopilot: " .. state)
      return
    end
    if what == "toggle" then
      what = autopilot == false and "on" or "off"
    end
    if what ~= "on" and what ~= "off" then
      flemmad.notify("autopilot takes on, off, toggle or status", vim.log.levels.WARN)
      return
    end
    autopilot = what == "on"
    if send_settings(b) then
      flemmad.notify(
        "autopilot " .. what .. " for this Neovim's chats"
          .. (autopilot and "" or ": replies' tool calls wait for a send")
          .. " (a chat's frontmatter setting wins)"
      )
    end
  end,
  complete = function(arglead)
    return vim.tbl_filter(function(item)
      return vim.startswith(item, arglead)
    end, { "on", "off", "toggle", "status" })
  end,
}

-- Flemma's spellings.
local aliases = {
  ["usage:recall"] = { "usage" },
  ["usage:estimate"] = { "estimate" },
  ["tool:approve"] = { "approve" },
  ["tool:approve-all"] = { "approve-all" },
  ["tool:reject"] = { "reject" },
  ["tool:execute"] = { "execute" },
  ["tool:background"] = { "background" },
  ["autopilot:enable"] = { "autopilot", "on" },
  ["autopilot:disable"] = { "autopilot", "off" },
  ["autopilot:toggle"] = { "autopilot", "toggle" },
  ["autopilot:status"] = { "autopilot", "status" },
  approveAll = { "approve-all" },
}

--- The subcommand names `:Flemma <Tab>` offers.
function M.names()
  local names = vim.tbl_keys(commands)
  table.sort(names)
  return names
end

--- Runs `:Flemma {line}`.
function M.run(line)
  local args = vim.split(vim.trim(line or ""), "%s+", { trimempty = true })
  local name = table.remove(args, 1)
  if name == nil then
    flemmad.notify(":Flemma takes " .. table.concat(M.names(), ", "), vim.log.levels.WARN)
    return
  end
  local alias = aliases[name]
  if alias then
    name = alias[1]
    for n = #alias, 2, -1 do
      table.insert(args, 1, alias[n])
    end
  end
  local command = commands[name]
  if command == nil then
    local suggestion = nil
    for _, candidate in ipairs(M.names()) do
      if vim.startswith(candidate, name:sub(1, 2)) then
        suggestion = candidate
        break
      end
    end
    flemmad.notify(
      "unknown subcommand '" .. name .. "'" .. (suggestion and ("; did you mean '" .. suggestion .. "'?") or "")
        .. " (:Flemma <Tab> lists them)",
      vim.log.levels.WARN
    )
    return
  end
  if command.anywhere then
    command.run(vim.api.nvim_get_current_buf(), args)
    return
  end
  local bufnr = chat_buffer()
  if bufnr then
    command.run(bufnr, args)
  end
end

--- Completion of `:Flemma …`.
function M.complete(arglead, cmdline)
  local words = vim.split(cmdline, "%s+", { trimempty = true })
  local completing_name = #words <= 1 or (#words == 2 and arglead ~= "")
  if completing_name then
    return vim.tbl_filter(function(name)
      return vim.startswith(name, arglead)
    end, M.names())
  end
  local command = commands[words[2]] or commands[(aliases[words[2]] or {})[1] or ""]
  if command and command.complete then
    return command.complete(arglead)
  end
  return {}
end

function M.setup()
  vim.api.nvim_create_user_command("Flemma", function(opts)
    M.run(opts.args)
  end, {
    nargs = "*",
    desc = "flemmad: send, cancel, switch, mode, status, usage, estimate, approve, reject, autopilot, jobs…",
    complete = M.complete,
  })
end

return M
