-- flemmad for Neovim's built-in LSP client (Neovim 0.7 and later).
--
--   require("flemmad").setup({ cmd = { "flemmad", "lsp" }, config = {}, keymaps = true })
--
-- Detects `*.chat` as filetype `chat`, attaches one `flemmad lsp` client to every chat buffer and
-- maps send / cancel / approve / reject / approve all / background / execute onto the server's
-- `flemma.*` commands through `workspace/executeCommand`. With `start = false` it leaves starting
-- the client to you (Neovim 0.11's `vim.lsp.enable("flemmad")` with clients/neovim/lsp/flemmad.lua)
-- and only sets the filetype and the keys. See docs/editors/neovim.md.
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
  keys = {
    send = "<C-]>",
    cancel = "<leader>fc",
    approve = "<leader>fa",
    reject = "<leader>fr",
    approve_all = "<leader>fA",
    background = "<leader>fb",
    execute = "<leader>fe",
    status = "<leader>fs",
  },
}

local options = vim.deepcopy(M.defaults)
local client_id = nil
-- Neovim 0.11 made client functions methods (`client:request`); the dot form warns there.
local methods = vim.fn.has("nvim-0.11") == 1

local function notify(message, level)
  vim.notify("flemmad: " .. message, level or vim.log.levels.INFO)
end

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


--- Sends `flemma.*` `command` for the buffer with `arguments` after its uri; an answer goes to
--- `on_answer` when given. The server tells why a command failed itself (`window/showMessage`,
--- shown as `LSP[flemmad] flemma: …`); a failure without its answer (the client stopped) is
--- told here.
local function request(command, bufnr, arguments, on_answer)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local c = M.client(bufnr)
  if c == nil then
    notify("the language server is not running for this buffer (is `flemmad` on $PATH?)", vim.log.levels.ERROR)
    return false
  end
  local function on_result(err, result)
    if err then
      if type(err.code) ~= "number" or err.code >= 0 then -- Neovim's own (JSON-RPC errors are negative)
        notify(command .. " failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      end
    elseif on_answer then
      on_answer(result)
    end
  end
  local params = { command = command, arguments = { vim.uri_from_bufnr(bufnr), (table.unpack or unpack)(arguments) } }
  if methods then
    c:request("workspace/executeCommand", params, on_result, bufnr)
  else
    c.request("workspace/executeCommand", params, on_result, bufnr)
  end
  return true
end

--- Runs a `flemma.*` command for the buffer with positional arguments after its uri.
function M.execute(command, bufnr, ...)
  return request(command, bufnr, { ... }, nil)
end

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
  return table.concat(parts, " · ")
end

--- Asks the server for the buffer's status and tells it (vim.notify).
function M.show_status(bufnr)
  return request("flemma.status", bufnr, {}, function(status)
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

local function reject()
  local bufnr = vim.api.nvim_get_current_buf()
  local id = M.tool_id_at(bufnr, vim.api.nvim_win_get_cursor(0)[1], true)
  if id == nil then
    notify("no pending tool call at or above the cursor", vim.log.levels.WARN)
    return
  end
  vim.ui.input({ prompt = "Reject " .. id .. " (reason, optional): " }, function(reason)
    if reason == nil then
      return -- cancelled: the tool stays pending
    elseif reason == "" then
      M.execute("flemma.reject", bufnr, id)
    else
      M.execute("flemma.reject", bufnr, id, reason)
    end
  end)
end

local function map_keys(bufnr)
  local k = options.keys
  local function map(lhs, rhs, desc)
    if lhs then
      vim.keymap.set({ "n" }, lhs, rhs, { buffer = bufnr, desc = "flemmad: " .. desc })
    end
  end
  map(k.send, function() M.execute("flemma.send", bufnr) end, "send")
  if k.send then
    vim.keymap.set("i", k.send, function() M.execute("flemma.send", bufnr) end, { buffer = bufnr, desc = "flemmad: send" })
  end
  map(k.cancel, function() M.execute("flemma.cancel", bufnr) end, "cancel")
  map(k.approve, with_tool("flemma.approve", true), "approve the pending tool call")
  map(k.reject, reject, "reject the pending tool call")
  map(k.approve_all, function() M.execute("flemma.approveAll", bufnr) end, "approve all pending tool calls")
  map(k.background, with_tool("flemma.background", false), "move the tool call to the background")
  map(k.execute, with_tool("flemma.execute", false), "execute the tool call now")
  map(k.status, function() M.show_status(bufnr) end, "show the chat's status")
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
    end,
  })
end

--- The id of the running client (nil before the first chat buffer), for tests and statuslines.
function M.client_id()
  return client_id
end

return M
