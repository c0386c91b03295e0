-- Headless smoke test: nvim --headless -u clients/neovim/init.lua -c "luafile clients/neovim/test/smoke.lua"
-- with FLEMMAD pointing at a server command and FAKE_LSP_LOG at the log the fake server writes.
local failures, checks = 0, 0
local function check(ok, what)
  checks = checks + 1
  if ok then
    io.stdout:write("ok - " .. what .. "\n")
  else
    failures = failures + 1
    io.stdout:write("not ok - " .. what .. "\n")
  end
end

local log_path = vim.env.FAKE_LSP_LOG
local function logged(method, predicate)
  local f = io.open(log_path, "r")
  if not f then
    return nil
  end
  for line in f:lines() do
    local message = vim.fn.json_decode(line)
    if message.method == method and (predicate == nil or predicate(message.params)) then
      f:close()
      return message.params
    end
  end
  f:close()
  return nil
end

local function wait_for(method, predicate)
  vim.wait(5000, function() return logged(method, predicate) ~= nil end, 20)
  return logged(method, predicate)
end

local chat = vim.env.CHAT_FILE
vim.cmd("edit " .. vim.fn.fnameescape(chat))
local bufnr = vim.api.nvim_get_current_buf()
local uri = vim.uri_from_bufnr(bufnr)
check(vim.bo.filetype == "chat", "*.chat gets filetype chat (got '" .. vim.bo.filetype .. "')")

local open = wait_for("textDocument/didOpen")
check(open ~= nil and open.textDocument.uri == uri, "the client attaches and opens the chat")
check(open ~= nil and open.textDocument.languageId == "chat", "languageId chat")
local init = logged("initialize")
local raw = io.open(log_path, "r"):read("*a")
check(init ~= nil and raw:find('"initializationOptions": {}', 1, true) ~= nil, "initializationOptions are sent as a JSON object")

local flemmad = require("flemmad")
check(flemmad.tool_id_at(bufnr, 18, true) == "toolu_01BBB", "pending tool id at the cursor")
check(flemmad.tool_id_at(bufnr, 10, false) == "toolu_01AAA", "tool use id at the cursor")
check(flemmad.tool_id_at(bufnr, 3, true) == nil, "no tool above the first message")

local function command_sent(name, args)
  return wait_for("workspace/executeCommand", function(p)
    return p.command == name and vim.deep_equal(p.arguments, args)
  end) ~= nil
end

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end

press("<C-]>")
check(command_sent("flemma.send", { uri }), "<C-]> runs flemma.send [uri]")

vim.api.nvim_win_set_cursor(0, { 18, 0 })
press("<leader>fa")
check(command_sent("flemma.approve", { uri, "toolu_01BBB" }), "<leader>fa approves the pending tool under the cursor")

vim.ui.input = function(_, on_confirm) on_confirm("run make test-unit instead") end
press("<leader>fr")
check(command_sent("flemma.reject", { uri, "toolu_01BBB", "run make test-unit instead" }), "<leader>fr rejects with a reason")

press("<leader>fA")
check(command_sent("flemma.approveAll", { uri }), "<leader>fA approves all")

vim.api.nvim_win_set_cursor(0, { 10, 0 })
press("<leader>fb")
check(command_sent("flemma.background", { uri, "toolu_01AAA" }), "<leader>fb backgrounds the tool under the cursor")

local first_client = flemmad.client_id()
local second = vim.fn.fnamemodify(chat, ":h") .. "/second.chat"
vim.cmd("edit " .. vim.fn.fnameescape(second))
local second_uri = vim.uri_from_bufnr(vim.api.nvim_get_current_buf())
check(wait_for("textDocument/didOpen", function(p) return p.textDocument.uri == second_uri end) ~= nil,
  "a second chat buffer is opened on the server")
local initializes = 0
for line in io.lines(log_path) do
  if vim.fn.json_decode(line).method == "initialize" then initializes = initializes + 1 end
end
check(initializes == 1 and flemmad.client_id() == first_client, "one client serves every chat buffer")

io.stdout:write(string.format("%d passed, %d failed\n", checks - failures, failures))
if failures > 0 then
  vim.cmd("cquit 1")
else
  vim.cmd("qall!")
end
