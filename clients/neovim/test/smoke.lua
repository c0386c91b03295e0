-- Headless test of clients/neovim against the real `flemmad lsp` (run by smoke.sh):
--   nvim --headless -u clients/neovim/init.lua -c "luafile clients/neovim/test/smoke.lua"
-- with FLEMMAD naming the server command and CHATS the directory of the chats smoke.sh wrote.
-- It goes through Neovim's own LSP UI (vim.lsp.buf.*, vim.diagnostic, the key maps) and checks
-- what a user would see: the buffer's text, the hover window, the cursor, the diagnostics.
local failures, checks, skips = 0, 0, 0
local function check(ok, what, detail)
  checks = checks + 1
  if ok then
    io.stdout:write("ok - " .. what .. "\n")
  else
    failures = failures + 1
    io.stdout:write("not ok - " .. what .. (detail and ("\n  " .. tostring(detail)) or "") .. "\n")
  end
end
local function skip(what, why)
  skips = skips + 1
  io.stdout:write("skip - " .. what .. ": " .. why .. "\n")
end

-- What the user is told: vim.notify, kept for the checks.
local notified = {}
vim.notify = function(message)
  table.insert(notified, message)
end
-- Neovim 0.7 prints each workspace edit's label ("Workspace edit flemma: approving …").
print = function(...)
  table.insert(notified, table.concat(vim.tbl_map(tostring, { ... }), " "))
end
local function notified_with(needle)
  for _, message in ipairs(notified) do
    if message:find(needle, 1, true) then
      return message
    end
  end
  return nil
end

local function wait(ms, predicate)
  vim.wait(ms, predicate, 20)
  return predicate()
end

local function text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
end

--- The 1-based line of the first line of `bufnr` that starts with `prefix`.
local function line_of(bufnr, prefix)
  for n, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:sub(1, #prefix) == prefix then
      return n
    end
  end
  return nil
end

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end

local function floating_windows()
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      table.insert(found, win)
    end
  end
  return found
end

local function close_floats()
  for _, win in ipairs(floating_windows()) do
    vim.api.nvim_win_close(win, true)
  end
end

local flemmad = require("flemmad")
local chats = vim.env.CHATS
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
-- The config vim.lsp.enable("flemmad") reads on 0.11.
local lsp_config = dofile(here .. "../lsp/flemmad.lua")

-- SMOKE_SEND_ONLY: smoke.sh's second pass, against a server that streams a scripted reply. It
-- also sets up as on 0.11: setup({ start = false }) for the filetype and keys, and the client
-- started from lsp/flemmad.lua by an autocommand, as vim.lsp.enable would.
local send_only = vim.env.SMOKE_SEND_ONLY == "1"
if send_only then
  flemmad.setup({ start = false })
  vim.api.nvim_create_autocmd("FileType", {
    pattern = lsp_config.filetypes,
    callback = function(args)
      local config = vim.tbl_extend("force", lsp_config, {
        name = "flemmad",
        cmd = { vim.env.FLEMMAD, "lsp" },
        root_dir = vim.fn.getcwd(),
      })
      config.root_markers, config.filetypes = nil, nil
      local id = vim.lsp.start_client(config)
      vim.lsp.buf_attach_client(args.buf, id)
    end,
  })
end

-- 1. Attach.
vim.cmd("edit " .. vim.fn.fnameescape(chats .. "/tools.chat"))
local bufnr = vim.api.nvim_get_current_buf()
local uri = vim.uri_from_bufnr(bufnr)
check(vim.bo.filetype == "chat", "*.chat gets filetype chat (got '" .. vim.bo.filetype .. "')")
local attached = wait(10000, function()
  local c = flemmad.client(bufnr)
  return c ~= nil and c.initialized and vim.lsp.buf_is_attached(bufnr, c.id)
end)
check(attached, "flemmad lsp starts and attaches to the chat buffer")
if not attached then
  io.stdout:write(string.format("%d passed, %d failed\n", checks - failures, failures))
  vim.cmd("cquit 1")
end
local client = flemmad.client(bufnr)
check(client.name == "flemmad", "the client is named flemmad")
check(send_only == (flemmad.client_id() == nil), send_only and "setup({ start = false }) starts no client"
  or "setup() started the client")
check(vim.deep_equal(lsp_config.cmd, { "flemmad", "lsp" }) and vim.deep_equal(lsp_config.filetypes, { "chat" }),
  "lsp/flemmad.lua is a vim.lsp.config for chat buffers running flemmad lsp")

if not send_only then
-- 2. Diagnostics: the pending placeholders block a send.
local function diagnostics_with(b, code)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(b)) do
    if d.code == code then
      table.insert(found, d)
    end
  end
  return found
end
wait(10000, function() return #diagnostics_with(bufnr, "template-tool") > 0 end)
local pending = diagnostics_with(bufnr, "template-tool")
check(#pending == 3, "a diagnostic on each of the three pending placeholders", vim.inspect(pending))
check(pending[1] ~= nil and pending[1].message:find("waiting for approval", 1, true) ~= nil,
  "it says the tool waits for approval", pending[1] and pending[1].message)

-- 3. Hover on a `job=` tool result: a floating window with the job's state.
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Result:** `toolu_01BBB`"), 4 })
vim.lsp.buf.hover()
local hovered = wait(10000, function() return #floating_windows() > 0 end)
local hover_text = ""
if hovered then
  local float = floating_windows()[1]
  hover_text = text(vim.api.nvim_win_get_buf(float))
end
check(hover_text:find("Job `job_ab12`: completed", 1, true) ~= nil,
  "hover on the job= tool result shows the job's state", hover_text)
close_floats()

-- 4. Definition: from a tool use to its result, and from the job= result to the job's result.
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Use:** `bash` (`toolu_01BBB`)"), 4 })
vim.lsp.buf.definition()
local result_line = line_of(bufnr, "**Tool Result:** `toolu_01BBB`")
check(wait(10000, function() return vim.api.nvim_win_get_cursor(0)[1] == result_line end),
  "definition jumps from the tool use to its result (line " .. result_line .. ")",
  "cursor on line " .. vim.api.nvim_win_get_cursor(0)[1])
vim.lsp.buf.definition()
local job_line = line_of(bufnr, "**Job Result:** `job_ab12`")
check(wait(10000, function() return vim.api.nvim_win_get_cursor(0)[1] == job_line end),
  "definition jumps from the job= result to the job result (line " .. job_line .. ")",
  "cursor on line " .. vim.api.nvim_win_get_cursor(0)[1])

-- 5. Approve through a code action: Neovim's menu (vim.ui.select) offers Approve on the
-- placeholder, the server edits the buffer through workspace/applyEdit.
local offered = {}
vim.ui.select = function(items, opts, on_choice)
  for _, item in ipairs(items) do
    -- 0.7 passes {client_id, action}; 0.10 and later {ctx = …, action = …}.
    local action = item.action or item[2]
    table.insert(offered, action.title)
  end
  for _, item in ipairs(items) do
    if (item.action or item[2]).title == "Approve `toolu_01AAA`" then
      return on_choice(item)
    end
  end
  on_choice(nil)
end
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Result:** `toolu_01AAA`"), 0 })
vim.lsp.buf.code_action()
check(wait(10000, function() return line_of(bufnr, "**Tool Result:** `toolu_01AAA` (approved)") ~= nil end),
  "the Approve code action turns the placeholder approved in the buffer", text(bufnr))
check(vim.tbl_contains(offered, "Reject `toolu_01AAA`"), "the code actions offer Reject too", vim.inspect(offered))

-- 6. The key maps, by what they do to the buffer.
vim.ui.input = function(_, on_confirm) on_confirm("do not delete the build") end
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Result:** `toolu_01CCC`") + 1, 0 })
press("<leader>fr")
check(wait(10000, function()
  return text(bufnr):find("**Tool Result:** `toolu_01CCC` (error)\n```\nUser feedback: do not delete the build\n```", 1, true) ~= nil
end), "<leader>fr rejects the pending tool under the cursor with the reason typed", text(bufnr))
press("<leader>fA")
check(wait(10000, function() return line_of(bufnr, "**Tool Result:** `toolu_01BBB` (approved job=job_ab12)") ~= nil end),
  "<leader>fA approves every pending tool", text(bufnr))
local function waiting_for_approval()
  return vim.tbl_filter(function(d) return d.message:find("waiting for approval", 1, true) ~= nil end,
    diagnostics_with(bufnr, "template-tool"))
end
check(wait(10000, function() return #waiting_for_approval() == 0 end),
  "with nothing pending, no diagnostic says a tool waits for approval", vim.inspect(waiting_for_approval()))
check(#vim.tbl_filter(function(d) return d.message:find("approved but has not run yet", 1, true) ~= nil end,
  diagnostics_with(bufnr, "template-tool")) == 2, "the two approved tools are diagnosed as not run yet")
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Use:** `bash` (`toolu_01BBB`)"), 0 })
press("<leader>fa")
check(wait(5000, function() return notified_with("no pending tool call at or above the cursor") ~= nil end),
  "<leader>fa on a tool use that is not pending says so")

-- 7. A second chat: the same client; an unclosed fence typed into it is a diagnostic.
vim.cmd("edit " .. vim.fn.fnameescape(chats .. "/notes.chat"))
local notes = vim.api.nvim_get_current_buf()
check(wait(10000, function() return vim.lsp.buf_is_attached(notes, client.id) end),
  "a second chat buffer attaches to the same client")
check(#vim.lsp.get_active_clients() == 1, "one client serves every chat buffer")
vim.api.nvim_buf_set_lines(notes, -1, -1, false, { "```rust", "fn main() {}" })
wait(10000, function() return #diagnostics_with(notes, "unclosed-fence") > 0 end)
local unclosed = diagnostics_with(notes, "unclosed-fence")[1]
check(unclosed ~= nil and unclosed.severity == vim.diagnostic.severity.ERROR,
  "an unclosed fence typed into the buffer is an error diagnostic", vim.inspect(vim.diagnostic.get(notes)))
check(unclosed ~= nil and unclosed.message:find("close the fence", 1, true) ~= nil,
  "its message says how to fix it", unclosed and unclosed.message)
check(unclosed ~= nil and unclosed.source == "flemma", "its source is flemma")
vim.api.nvim_buf_set_lines(notes, -1, -1, false, { "```" })
check(wait(10000, function() return #diagnostics_with(notes, "unclosed-fence") == 0 end),
  "closing the fence clears the diagnostic")

end

-- 8. Send: the reply from flemma-mock-provider streams into the buffer. Until the engine is
-- part of the language server, the server answers that flemma.send is not available yet.
vim.cmd("edit " .. vim.fn.fnameescape(chats .. "/send.chat"))
local send = vim.api.nvim_get_current_buf()
wait(10000, function() return vim.lsp.buf_is_attached(send, client.id) end)
notified = {}
press("<C-]>")
local function send_error()
  return notified_with("flemma.send failed")
end
local function replied()
  local t = text(send)
  return t:find("@Assistant:\nYou said: Say hello to Neovim.", 1, true) ~= nil and t:find("\n@You:%s*$") ~= nil
end
wait(10000, function() return send_error() ~= nil or text(send):find("@Assistant:", 1, true) ~= nil end)
if send_error() and send_error():find("not available yet", 1, true) then
  skip("<C-]> (flemma.send) streams the reply into the buffer", "this flemmad's language server says: " .. send_error())
else
  check(send_error() == nil, "<C-]> sends: flemma.send is accepted", send_error())
  local streamed = wait(30000, replied)
  check(streamed, "the reply streams into the buffer, then an empty @You:", text(send))
  check(vim.bo[send].modified, "the reply is in the buffer, for the user to save")
end

if not send_only then
-- 9. The key maps reach the server with the buffer's URI (the engine commands answer through
-- vim.notify while the engine is not in the server).
vim.cmd("buffer " .. bufnr)
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Use:** `bash` (`toolu_01BBB`)"), 0 })
notified = {}
press("<leader>fb")
check(wait(10000, function() return #notified > 0 end) and notified_with("invalid") == nil
  and notified_with("not a document open") == nil,
  "<leader>fb sends flemma.background [uri, id] to the server", vim.inspect(notified))

end

if send_only then
  -- Not the plain "N passed, N failed" line: this pass may be a known failure (smoke.sh).
  io.stdout:write(string.format("scripted send pass - %d of %d checks ok\n", checks - failures, checks))
else
  io.stdout:write(string.format("%d passed, %d failed, %d skipped\n", checks - failures, failures, skips))
end
if failures > 0 then
  vim.cmd("cquit 1")
else
  vim.cmd("qall!")
end
