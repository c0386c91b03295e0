-- flemmad for Neovim: the plugin (Neovim 0.11 and later) and its minimal core (0.7 and later).
--
--   require("flemmad").setup({ ... })   -- see M.defaults and docs/editors/neovim.md
--
-- Everywhere: `*.chat` is filetype `chat`, one `flemmad lsp` client serves every chat buffer,
-- and keys send, cancel, approve, reject, approve all, background and execute through the
-- server's `flemma.*` commands. On 0.11 and later also what a Flemma user expects on screen:
-- highlights (the server's semantic tokens), role rulers and a gutter on the current turn,
-- thinking folded with previews, a progress line while a reply streams with the window
-- following it, usage after every reply, pending calls previewed where the cursor lands,
-- `]m`/`[m` and `im`/`am`, and the `:Flemma` command. With `start = false` it leaves starting
-- the client to you (0.11's `vim.lsp.enable("flemmad")` with clients/neovim/lsp/flemmad.lua).
local M = {}

M.defaults = {
  -- The server command; `flemmad lsp` proxies to the running daemon or runs the engine itself.
  cmd = { "flemmad", "lsp" },
  -- Sent as initializationOptions: the keys of flemmad's config file, overriding it.
  config = {},
  filetype = "chat",
  -- false leaves the keys to you (or to the Flemma plugin on the same files).
  keymaps = true,
  -- false: do not start the client; something else does (vim.lsp.enable on 0.11). The keys then
  -- talk to whichever client named `name` is attached to the buffer.
  start = true,
  name = "flemmad",
  -- Flemma's keys where Flemma has them; a key set to false is not mapped.
  keys = {
    send = "<C-]>", -- normal and insert mode
    cancel = "<C-c>",
    approve = "<M-a>", -- the pending call at or above the cursor
    reject = "<M-r>", -- asks for a reason
    approve_all = "<M-A>",
    background = "<M-b>",
    execute = "<M-CR>",
    status = "<leader>fs",
    -- Neovim 0.11 and later:
    message_next = "]m",
    message_prev = "[m",
    text_object = "m", -- `im` / `am`
    fold_toggle = false, -- Flemma's is "<Space>" (often the leader key, so off here)
  },
  -- Neovim 0.11 and later: what the plugin shows.
  ui = {
    rulers = true, -- role lines drawn as `─ You ───…`
    turn = true, -- a gutter sign on the lines of the message under the cursor
    folds = true, -- folding from the server (vim.lsp.foldexpr) with its previews
    -- 1 (Flemma's): messages open, their thinking, tool calls and results closed (also those
    -- a reply brings; never a call waiting for approval); 0: an outline; 99: all open.
    foldlevel = 1,
    inlay_hints = true, -- the preview of a pending call inside its placeholder
    pending_preview = true, -- the command, diff or content of each pending call under it
    progress = true, -- the spinner line while a reply streams or a tool runs
    follow = true, -- the window follows a reply while the cursor is at the end
    land = true, -- at the end of a reply: the cursor on the new @You: or the first pending call
    -- A chat longer than this (lines) keeps typing cheap: no folding from the server (Neovim
    -- asks for all of a chat's folds after every change), and its messages (rulers, motions)
    -- are asked for when it opens, when a reply ends and for a motion, not after each edit.
    max_lines = 50000,
  },
  -- After every reply: "float" (a line at the top right of the window, for `timeout` ms),
  -- "notify" (vim.notify, INFO) or false. `:Flemma usage` tells it on demand.
  usage = { show = "float", timeout = 10000 },
}

local options = vim.deepcopy(M.defaults)
local client_id = nil
-- Neovim 0.11 made client functions methods (`client:request`); the dot form warns there.
local methods = vim.fn.has("nvim-0.11") == 1
M.full = methods

function M.options()
  return options
end

-- ---- messages to the user: short, one line, never a hit-enter prompt -----------------------

local history = {}

--- Tells the user `message` (vim.notify with a level), cut to one line that fits the command
--- line when vim.notify is Neovim's own (which would otherwise ask for Enter); the whole text
--- stays in `:Flemma messages`.
--- Opens a read-only scratch split at the bottom named `name` showing `lines` (with
--- `filetype`, if given): `:Flemma messages`, `:Flemma changes`.
function M.scratch_split(name, lines, filetype)
  vim.cmd("botright new")
  local scratch = vim.api.nvim_get_current_buf()
  vim.bo[scratch].buftype = "nofile"
  vim.bo[scratch].bufhidden = "wipe"
  vim.bo[scratch].swapfile = false
  vim.api.nvim_buf_set_lines(scratch, 0, -1, false, lines)
  vim.bo[scratch].modifiable = false
  if filetype then
    vim.bo[scratch].filetype = filetype
  end
  pcall(vim.api.nvim_buf_set_name, scratch, name)
  return scratch
end

function M.notify(message, level)
  level = level or vim.log.levels.INFO
  message = "flemmad: " .. tostring(message)
  table.insert(history, { level = level, message = message })
  if #history > 100 then
    table.remove(history, 1)
  end
  local shown = message:gsub("%s*\n%s*", " ")
  local info = debug.getinfo(vim.notify, "S")
  local builtin = info and info.source and info.source:find("vim/_editor", 1, true) ~= nil
  if builtin then
    local room = math.max(20, (vim.v.echospace or vim.o.columns) - 1)
    if vim.fn.strdisplaywidth(shown) > room then
      shown = vim.fn.strcharpart(shown, 0, room - 1) .. "…"
      while vim.fn.strdisplaywidth(shown) > room do
        shown = vim.fn.strcharpart(shown, 0, vim.fn.strchars(shown) - 2) .. "…"
      end
    end
  end
  vim.notify(shown, level, { title = "flemmad" })
end

--- The messages told so far (oldest first): `{ level, message }` with their whole text.
function M.history()
  return history
end

local notify = M.notify

--- `window/showMessage` from flemmad: told as ours (short, with its level).
function M.on_show_message(_, params)
  if type(params) ~= "table" or type(params.message) ~= "string" then
    return
  end
  local levels = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }
  local message = params.message:gsub("^flemma: ", "")
  notify(message, levels[params.type] or vim.log.levels.INFO)
end

--- `flemma/event` from flemmad: the live view of the document (0.11 and later).
function M.on_event(_, params, ctx)
  if methods and type(params) == "table" then
    require("flemmad.live").on_event(params, ctx)
  end
end

--- The handlers a flemmad client needs (lsp/flemmad.lua and setup() give them to it).
function M.handlers()
  return {
    ["flemma/event"] = function(...)
      return require("flemmad").on_event(...)
    end,
    ["window/showMessage"] = function(...)
      return require("flemmad").on_show_message(...)
    end,
  }
end

-- ---- the client and its commands ------------------------------------------------------------

--- The tool id a command at `line` (1-based) is about: the nearest tool header at or above it
--- (`**Tool Result:** `id`` or `**Tool Use:** `name` (`id`)`). `pending_only` limits it to
--- pending placeholders. Returns nil when there is none.
function M.tool_id_at(bufnr, line, pending_only)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, line, false)
  for n = #lines, 1, -1 do
    local text = lines[n]
    local id, suffix = text:match("^%*%*Tool Result:%*%*%s+`([^`]+)`%s*(.*)$")
    if id then
      if not pending_only or suffix:match("pending") then
        return id
      end
    elseif not pending_only then
      id = text:match("^%*%*Tool Use:%*%*%s+`[^`]+`%s+%(`([^`]+)`%)")
      if id then
        return id
      end
    end
  end
  return nil
end

--- The flemmad client of `bufnr` (the current buffer when nil): the one setup() started, else
--- the client named `options.name` attached to the buffer. nil when there is none.
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if client_id ~= nil then
    local c = vim.lsp.get_client_by_id(client_id)
    if c ~= nil then
      return c
    end
  end
  local attached
  if vim.lsp.get_clients ~= nil then -- 0.10+
    attached = vim.lsp.get_clients({ bufnr = bufnr, name = options.name })
  else
    attached = vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  end
  for _, c in ipairs(attached) do
    if c.name == options.name then
      return c
    end
  end
  return nil
end

--- Sends an LSP request of the buffer's flemmad client; `on_answer(result)` on success. A
--- refusal is told by the server itself (`window/showMessage`); a failure without its answer
--- (the client stopped) is told here. Returns false when there is no client.
function M.request(method, params, bufnr, on_answer, what)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local c = M.client(bufnr)
  if c == nil then
    notify("the language server is not running for this buffer (is `flemmad` on $PATH?)", vim.log.levels.ERROR)
    return false
  end
  local function on_result(err, result)
    if err then
      if type(err.code) ~= "number" or err.code >= 0 then -- Neovim's own (JSON-RPC errors are negative)
        notify((what or method) .. " failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      end
    elseif on_answer then
      on_answer(result)
    end
  end
  if methods then
    c:request(method, params, on_result, bufnr)
  else
    c.request(method, params, on_result, bufnr)
  end
  return true
end

--- Sends `flemma.*` `command` for the buffer with `arguments` after its uri.
local function command_request(command, bufnr, arguments, on_answer)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local params = { command = command, arguments = { vim.uri_from_bufnr(bufnr), (table.unpack or unpack)(arguments) } }
  return M.request("workspace/executeCommand", params, bufnr, on_answer, command)
end

local function chat_name(bufnr)
  return vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ":t")
end

--- What a command did, in one line, from the server's answer.
function M.told(command, bufnr, answer, arguments)
  local name = chat_name(bufnr)
  local ids = type(answer) == "table" and type(answer.toolIds) == "table" and answer.toolIds or {}
  local id = arguments[1]
  local lines = {
    ["flemma.send"] = function()
      if type(answer) == "table" and answer.started == false then
        return "sent to " .. name .. "'s running cycle"
      end
      return "sending " .. name
    end,
    ["flemma.cancel"] = function()
      return "cancelled what ran in " .. name
    end,
    ["flemma.approve"] = function()
      return "approved " .. tostring(id)
    end,
    ["flemma.reject"] = function()
      return "rejected " .. tostring(id) .. (arguments[2] and " with your reason" or "")
    end,
    ["flemma.approveAll"] = function()
      if #ids == 0 then
        return "no call waits for approval in " .. name
      end
      return string.format("approved %d call%s: %s", #ids, #ids == 1 and "" or "s", table.concat(ids, ", "))
    end,
    ["flemma.background"] = function()
      return "moved " .. tostring(id) .. " to the background"
    end,
    ["flemma.execute"] = function()
      return "executing " .. tostring(id)
    end,
    ["flemma.switch"] = function()
      return type(answer) == "table" and answer.message or ("switched to " .. tostring(id))
    end,
    ["flemma.mode"] = function()
      return type(answer) == "table" and answer.message or ("mode " .. tostring(id))
    end,
  }
  local line = lines[command]
  return line and line() or (command .. " done")
end

--- Runs a `flemma.*` command for the buffer with positional arguments after its uri, and tells
--- what it did.
function M.execute(command, bufnr, ...)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local arguments = { ... }
  return command_request(command, bufnr, arguments, function(answer)
    notify(M.told(command, bufnr, answer, arguments))
    if methods then
      require("flemmad.live").after_command(bufnr, command, answer)
    end
  end)
end

--- Runs a `flemma.*` command and hands its answer to `on_answer` (nothing is told).
function M.ask(command, bufnr, arguments, on_answer)
  return command_request(command, bufnr, arguments or {}, on_answer)
end

local function thousands(n)
  local s = tostring(math.floor(n or 0))
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end
M.thousands = thousands

--- One line for a `flemma.status` answer: the state, what waits or runs, tokens and cost.
function M.status_line(status)
  if type(status) ~= "table" then
    return "no status (the server answered " .. vim.inspect(status) .. ")"
  end
  local parts = { vim.fn.fnamemodify(status.path or "?", ":t") .. ": " .. tostring(status.state or "?") }
  if type(status.pending) == "table" and #status.pending > 0 then
    table.insert(parts, "waiting for approval: " .. table.concat(status.pending, ", "))
  end
  if type(status.runningTools) == "table" and #status.runningTools > 0 then
    table.insert(parts, "running: " .. table.concat(status.runningTools, ", "))
  end
  if type(status.jobs) == "table" and #status.jobs > 0 then
    local jobs = {}
    for _, job in ipairs(status.jobs) do
      table.insert(jobs, tostring(job.jobId) .. " (" .. tostring(job.toolName) .. ", " .. tostring(job.state) .. ")")
    end
    table.insert(parts, "jobs: " .. table.concat(jobs, ", "))
  end
  local usage = status.usage
  if type(usage) == "table" and ((usage.inputTokens or 0) > 0 or (usage.outputTokens or 0) > 0) then
    local tokens = string.format("%d input, %d output tokens", usage.inputTokens or 0, usage.outputTokens or 0)
    if type(usage.cost) == "number" then
      tokens = tokens .. string.format(", $%.4f", usage.cost)
    end
    table.insert(parts, tokens)
  end
  if type(status.lastStop) == "string" and status.lastStop ~= status.state then
    table.insert(parts, "last stop: " .. status.lastStop)
  end
  if type(status.mode) == "string" then
    table.insert(parts, status.mode .. " mode")
  end
  if type(status.switched) == "table" then
    table.insert(parts, "switched to " .. tostring(status.switched.provider) .. "/" .. tostring(status.switched.model))
  end
  return table.concat(parts, " · ")
end

--- Asks the server for the buffer's status and tells it.
function M.show_status(bufnr)
  return command_request("flemma.status", bufnr, {}, function(status)
    notify(M.status_line(status))
  end)
end

local function with_tool(command, pending_only)
  return function()
    local bufnr = vim.api.nvim_get_current_buf()
    local line = vim.api.nvim_win_get_cursor(0)[1]
    local id = M.tool_id_at(bufnr, line, pending_only)
    if id == nil then
      notify("no " .. (pending_only and "pending " or "") .. "tool call at or above the cursor", vim.log.levels.WARN)
      return
    end
    M.execute(command, bufnr, id)
  end
end

--- Asks for a reason and rejects the pending call `id` (the one at or above the cursor when
--- nil); `Esc` keeps it pending.
function M.reject(bufnr, id)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  id = id or M.tool_id_at(bufnr, vim.api.nvim_win_get_cursor(0)[1], true)
  if id == nil then
    notify("no pending tool call at or above the cursor", vim.log.levels.WARN)
    return
  end
  vim.ui.input({ prompt = "Reject " .. id .. " (reason, optional): " }, function(reason)
    if reason == nil then
      notify(id .. " still waits for approval")
    elseif vim.trim(reason) == "" then
      M.execute("flemma.reject", bufnr, id)
    else
      M.execute("flemma.reject", bufnr, id, reason)
    end
  end)
end

M.approve = with_tool("flemma.approve", true)

local function map_keys(bufnr)
  local k = options.keys
  local function map(modes, lhs, rhs, desc)
    if lhs then
      vim.keymap.set(modes, lhs, rhs, { buffer = bufnr, desc = "flemmad: " .. desc })
    end
  end
  local function send()
    M.execute("flemma.send", bufnr)
  end
  map({ "n", "i" }, k.send, send, "send")
  map("n", k.cancel, function() M.execute("flemma.cancel", bufnr) end, "cancel")
  map("n", k.approve, M.approve, "approve the pending tool call")
  map("n", k.reject, function() M.reject(bufnr) end, "reject the pending tool call")
  map("n", k.approve_all, function() M.execute("flemma.approveAll", bufnr) end, "approve all pending tool calls")
  map("n", k.background, with_tool("flemma.background", false), "move the tool call to the background")
  map("n", k.execute, with_tool("flemma.execute", false), "execute the tool call now")
  map("n", k.status, function() M.show_status(bufnr) end, "show the chat's status")
  map("n", k.fold_toggle, "za", "toggle the fold under the cursor")
  if methods then
    require("flemmad.messages").map_keys(bufnr, k)
  end
end

local told_not_started = false

--- On 0.11 with `vim.lsp.enable(name)`: Neovim starts nothing, silently, when the config's
--- command is not executable (it only logs "cannot start"). Says so once, with the fix.
local function check_enabled_config()
  if told_not_started or vim.lsp.is_enabled == nil or not vim.lsp.is_enabled(options.name) then
    return
  end
  local ok, config = pcall(function()
    return vim.lsp.config[options.name]
  end)
  local cmd = ok and type(config) == "table" and config.cmd or nil
  if type(cmd) ~= "table" or cmd[1] == nil or vim.fn.executable(cmd[1]) == 1 then
    return
  end
  told_not_started = true
  notify(
    string.format(
      "vim.lsp.enable(%q) starts nothing for chat buffers: '%s' is not executable or not on $PATH."
        .. " Install flemmad (`cargo install --path .` in its checkout) or give its path:"
        .. " vim.lsp.config(%q, { cmd = { '/path/to/flemmad', 'lsp' } })",
      options.name,
      cmd[1],
      options.name
    ),
    vim.log.levels.ERROR
  )
end

local function attach(bufnr)
  if vim.fn.executable(options.cmd[1]) ~= 1 then
    notify("'" .. options.cmd[1] .. "' is not executable or not on $PATH: install flemmad or set cmd in setup()", vim.log.levels.ERROR)
    return
  end
  local config = {
    name = options.name,
    cmd = options.cmd,
    root_dir = (vim.uv or vim.loop).cwd(),
    -- an empty Lua table would go out as a JSON array: send an object
    init_options = next(options.config) == nil and vim.empty_dict() or options.config,
    handlers = M.handlers(),
  }
  if vim.lsp.start ~= nil then
    -- 0.8+: starts the client once and reuses it (same name and root) for every chat buffer
    client_id = vim.lsp.start(config, { bufnr = bufnr })
    if client_id == nil then
      notify("could not start " .. table.concat(options.cmd, " "), vim.log.levels.ERROR)
    end
    return
  end
  -- 0.7: one client for all chat buffers, started on the first
  local c = client_id and vim.lsp.get_client_by_id(client_id)
  local stopped = not c or c.is_stopped()
  if stopped then
    client_id = vim.lsp.start_client(config)
    if client_id == nil then
      notify("could not start " .. table.concat(options.cmd, " "), vim.log.levels.ERROR)
      return
    end
  end
  vim.lsp.buf_attach_client(bufnr, client_id)
end

--- The flemmad command line the plugin runs for CLI-only work (`count --stdin` for
--- `:Flemma estimate`): the client's command without its `lsp` arguments.
function M.flemmad_command(bufnr)
  local c = M.client(bufnr)
  local cmd = c and c.config and c.config.cmd or options.cmd
  if type(cmd) ~= "table" or cmd[1] == nil then
    return nil
  end
  return cmd[1]
end

function M.setup(opts)
  options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  local group = vim.api.nvim_create_augroup("flemmad", { clear = true })
  if vim.filetype and vim.filetype.add and vim.fn.has("nvim-0.8") == 1 then
    vim.filetype.add({ extension = { chat = options.filetype } })
  else
    vim.api.nvim_create_autocmd({ "BufRead", "BufNewFile" }, {
      group = group,
      pattern = "*.chat",
      callback = function(args)
        vim.bo[args.buf].filetype = options.filetype
      end,
    })
  end
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = options.filetype,
    callback = function(args)
      if options.start then
        attach(args.buf)
      else
        check_enabled_config()
      end
      if options.keymaps then
        map_keys(args.buf)
      end
      if methods then
        require("flemmad.ui").buffer(args.buf)
      end
    end,
  })
  if methods then
    require("flemmad.ui").setup(group)
    require("flemmad.command").setup()
    require("flemmad.review").setup()
    require("flemmad.changes").setup()
  end
end

--- For a statusline: the current chat buffer's context meter (`context 85% of 200,000`, the
--- last request against the model's window), or "" (docs/context.md):
--- `vim.o.statusline = "%f %=%{v:lua.require'flemmad'.statusline()} "`.
function M.statusline()
  return require("flemmad.live").context_line(vim.api.nvim_get_current_buf()) or ""
end

--- The id of the running client (nil before the first chat buffer), for tests and statuslines.
function M.client_id()
  return client_id
end

return M
