-- Headless test of clients/neovim against the real `flemmad lsp` (run by smoke.sh):
--   nvim --headless -u clients/neovim/init.lua -c "luafile clients/neovim/test/smoke.lua"
-- with FLEMMAD naming the server command and CHATS the directory of the chats smoke.sh wrote.
-- It goes through Neovim's own LSP UI (vim.lsp.buf.*, vim.diagnostic, the key maps) and checks
-- what a user would see: the buffer's text, the hover window, the cursor, the diagnostics.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local T = dofile(here .. "helpers.lua")
local check, wait, text, line_of, press = T.check, T.wait, T.text, T.line_of, T.press
local queue_turns, read_file = T.queue_turns, T.read_file

-- What the user is told: vim.notify, kept for the checks.
local notified = {}
vim.notify = function(message)
  table.insert(notified, message)
end
-- Neovim prints each workspace edit's label ("Workspace edit flemma: approving …"); the
-- streamed edits carry none, so a reply must not print any.
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

--- Accepts the code action titled `title` when Neovim's menu (vim.ui.select) offers it; records
--- every title offered in `offered`.
local function choose_code_action(title, offered)
  vim.ui.select = function(items, _, on_choice)
    for _, item in ipairs(items) do
      -- 0.7 passes {client_id, action}; 0.10 and later {ctx = …, action = …}.
      table.insert(offered, (item.action or item[2]).title)
    end
    for _, item in ipairs(items) do
      if (item.action or item[2]).title == title then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
end

local flemmad = require("flemmad")
local chats = vim.env.CHATS
-- The config vim.lsp.enable("flemmad") reads on 0.11.
local lsp_config = dofile(here .. "../lsp/flemmad.lua")

-- SMOKE_SETUP: how the client is started.
--   setup     init.lua: require("flemmad").setup() starts it (every Neovim);
--   enable    test/init-0.11.lua, the documented 0.11 set-up: setup({ start = false }) for the
--             filetype and keys, vim.lsp.config + vim.lsp.enable("flemmad") start it;
--   emulated  on 0.7, which has no vim.lsp.enable: setup({ start = false }) and the client
--             started from lsp/flemmad.lua by an autocommand, as vim.lsp.enable would.
-- SMOKE_SEND_ONLY=1: the attach and send steps only (smoke.sh's second pass).
local setup_kind = vim.env.SMOKE_SETUP or "setup"
local send_only = vim.env.SMOKE_SEND_ONLY == "1"
local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
if setup_kind == "emulated" then
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
  T.finish()
end
local client = flemmad.client(bufnr)
check(client.name == "flemmad", "the client is named flemmad")
if setup_kind == "setup" then
  check(flemmad.client_id() ~= nil, "setup() started the client")
else
  check(flemmad.client_id() == nil, "setup({ start = false }) starts no client of its own (" .. setup_kind .. " does)")
end
if setup_kind == "enable" then
  check(vim.lsp.is_enabled("flemmad") and client.config.cmd[1] == vim.env.FLEMMAD
      and vim.deep_equal(client.config.filetypes, { "chat" }),
    "vim.lsp.enable started the client from lsp/flemmad.lua with vim.lsp.config's cmd", vim.inspect(client.config.cmd))
end
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
-- The jump the docs recommend: vim.diagnostic.jump on 0.11 (goto_next is deprecated there).
vim.api.nvim_win_set_cursor(0, { 1, 0 })
local jump = vim.diagnostic.jump and "vim.diagnostic.jump({ count = 1 })" or "vim.diagnostic.goto_next()"
if vim.diagnostic.jump then
  vim.diagnostic.jump({ count = 1 })
else
  vim.diagnostic.goto_next({ float = false }) -- 0.7 would open the diagnostic's float
end
check(vim.api.nvim_win_get_cursor(0)[1] == line_of(bufnr, "**Tool Result:** `toolu_01AAA` (pending)"),
  jump .. " goes to the first tool waiting for approval", "cursor on line " .. vim.api.nvim_win_get_cursor(0)[1])

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
-- placeholder, the server edits the buffer through workspace/applyEdit. Two tools still wait
-- for the user, so nothing runs yet.
local offered = {}
choose_code_action("Approve `toolu_01AAA`", offered)
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Result:** `toolu_01AAA`"), 0 })
vim.lsp.buf.code_action()
check(wait(10000, function() return line_of(bufnr, "**Tool Result:** `toolu_01AAA` (approved)") ~= nil end),
  "the Approve code action turns the placeholder approved in the buffer", text(bufnr))
check(vim.tbl_contains(offered, "Reject `toolu_01AAA`"), "the code actions offer Reject too", vim.inspect(offered))

-- 6. The key maps, by what they do to the buffer: reject with a reason, then approve the last
-- pending tool, which lets the cycle go on (the tools run, the next request goes out).
vim.ui.input = function(_, on_confirm) on_confirm("do not delete the build") end
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Result:** `toolu_01CCC`") + 1, 0 })
press("<M-r>")
check(wait(10000, function()
  return text(bufnr):find("**Tool Result:** `toolu_01CCC` (rejected)\n```\nUser feedback: do not delete the build\n```", 1, true) ~= nil
end), "<M-r> rejects the pending tool under the cursor with the reason typed", text(bufnr))
local function diagnosed(needle)
  return vim.tbl_filter(function(d) return d.message:find(needle, 1, true) ~= nil end,
    diagnostics_with(bufnr, "template-tool"))
end
check(wait(10000, function() return #diagnosed("approved but has not run yet") == 1 end),
  "while a tool still waits for approval, the approved one is diagnosed as not run yet",
  vim.inspect(diagnostics_with(bufnr, "template-tool")))
check(read_file(chats .. "/hello.md") == nil and line_of(bufnr, "**Tool Result:** `toolu_01AAA` (approved)") ~= nil,
  "nothing runs while a tool waits for approval (hello.md is not written yet)")

queue_turns({ { steps = { { text = "hello.md is written and the tests pass; I left the build alone." } } } })
press("<M-A>")
local cycle_done = {
  "**Tool Result:** `toolu_01AAA`\n```\nCreated hello.md (1 lines, 2 bytes)\n",
  "**Tool Result:** `toolu_01BBB` (job=job_ab12)\n```\n3 passed\n```",
  "**Tool Result:** `toolu_01CCC` (error)\n```\nUser feedback: do not delete the build\n```",
  "@Assistant:\nhello.md is written and the tests pass; I left the build alone.\n\n@You:\n",
}
local function cycle_missing()
  local t = text(bufnr) .. "\n"
  for _, needle in ipairs(cycle_done) do
    if t:find(needle, 1, true) == nil then
      return needle
    end
  end
  return t:find("\n@You:%s*$") == nil and "an empty @You: at the end" or nil
end
check(wait(30000, function() return cycle_missing() == nil end),
  "<M-A> approves the last pending tool and the cycle goes on: both tools run, the rejection"
    .. " is sent as an error, the reply and an empty @You: land in the buffer",
  "missing: " .. tostring(cycle_missing()) .. "\n" .. text(bufnr))
check(read_file(chats .. "/hello.md") == "hi", "the write tool wrote hello.md in the chat's directory",
  tostring(read_file(chats .. "/hello.md")))
check(wait(10000, function() return #diagnosed("waiting for approval") == 0 and #diagnosed("has not run yet") == 0 end),
  "with every tool resolved, no diagnostic says a tool waits or has not run", vim.inspect(diagnostics_with(bufnr, "template-tool")))
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Use:** `bash` (`toolu_01BBB`)"), 0 })
press("<M-a>")
check(wait(5000, function() return notified_with("no pending tool call at or above the cursor") ~= nil end),
  "<M-a> on a tool use that is not pending says so")

-- 7. A second chat: the same client; keys typed that change no diagnostic publish none (each
-- publish costs Neovim a read of every line); an unclosed fence typed into it is a diagnostic.
local publishes = {}
local publish_handler = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ...)
  if result and result.uri then
    publishes[result.uri] = (publishes[result.uri] or 0) + 1
  end
  return publish_handler(err, result, ...)
end
vim.cmd("edit " .. vim.fn.fnameescape(chats .. "/notes.chat"))
local notes = vim.api.nvim_get_current_buf()
local notes_uri = vim.uri_from_bufnr(notes)
check(wait(10000, function() return vim.lsp.buf_is_attached(notes, client.id) end),
  "a second chat buffer attaches to the same client")
check(#get_clients() == 1, "one client serves every chat buffer")
check(wait(10000, function() return (publishes[notes_uri] or 0) > 0 end), "its first analysis is published (no problem in it)")
local before_typing = publishes[notes_uri]
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(notes), 0 })
-- A key at a time (each an edit of its own, sent after Neovim's 150 ms debounce and analysed).
for _, key in ipairs({ " ", "a", "n", "d", "<CR>", "m", "o", "r", "e" }) do
  press("A" .. key .. "<Esc>")
  vim.wait(250)
end
vim.wait(500)
check(text(notes):find("Here is the snippet: and\nmore", 1, true) ~= nil and publishes[notes_uri] == before_typing,
  "typing that changes no diagnostic (Enter included) publishes none",
  (publishes[notes_uri] - before_typing) .. " publishes for " .. text(notes))
vim.api.nvim_buf_set_lines(notes, -1, -1, false, { "```rust", "fn main() {}" })
check(wait(10000, function() return #diagnostics_with(notes, "unclosed-fence") > 0 end)
  and publishes[notes_uri] > before_typing, "a change that brings a problem is published")
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

-- 8. Send: the reply from flemma-mock-provider streams into the buffer (slowly, so it arrives in
-- many edits at the end of the buffer, which Neovim 0.7 reports in its own shape), then a turn
-- with a tool call: pending, approved through the code action, run, and the next reply.
vim.cmd("edit " .. vim.fn.fnameescape(chats .. "/send.chat"))
local send = vim.api.nvim_get_current_buf()
wait(10000, function() return vim.lsp.buf_is_attached(send, client.id) end)
local edits = 0
vim.api.nvim_buf_attach(send, false, { on_lines = function() edits = edits + 1 end })
local greeting = "Hello, Neovim! This reply comes from the mock provider, a few bytes at a time."
queue_turns({ { steps = { { text = greeting } }, bytes_per_sec = 1500 } })
notified = {}
press("<C-]>")
local function send_error()
  return notified_with("`flemma.send` failed")
end
local function ends_with_empty_you(b)
  return text(b):find("\n@You:%s*$") ~= nil
end
local function replied()
  return text(send):find("@Assistant:\n" .. greeting .. "\n\n@You:", 1, true) ~= nil and ends_with_empty_you(send)
end
wait(10000, function() return send_error() ~= nil or text(send):find("@Assistant:", 1, true) ~= nil end)
check(send_error() == nil, "<C-]> sends: flemma.send is accepted", send_error())
-- What a progress UI (a statusline) reads meanwhile: the server's $/progress, as Neovim keeps it.
local progress_seen = {}
local function note_progress()
  local messages = vim.lsp.util.get_progress_messages and vim.lsp.util.get_progress_messages() or {}
  for _, m in ipairs(messages) do
    progress_seen[(m.title or "") .. (m.message and (" | " .. m.message) or "")] = true
  end
  if vim.lsp.status then
    progress_seen[vim.lsp.status()] = true
  end
end
local streamed = wait(30000, function()
  note_progress()
  return replied()
end)
check(streamed, "the reply streams into the buffer, then an empty @You:", text(send))
check(edits >= 4, "the reply arrived in several edits (" .. edits .. "), none of them stalled the stream")
local progress_titles = table.concat(vim.tbl_keys(progress_seen), "\n")
check(progress_titles:find("send.chat: streaming the reply", 1, true) ~= nil
    and progress_titles:find("flemma:", 1, true) == nil,
  "while it streams, Neovim's progress says so (send.chat: streaming the reply; the client names the server)",
  progress_titles)
check(vim.bo[send].modified, "the reply is in the buffer, for the user to save")
check(notified_with("Workspace edit") == nil, "the streamed edits print nothing (no `Workspace edit …` per piece)",
  notified_with("Workspace edit"))

local tool_line = "%*%*Tool Result:%*%* `(toolu_%w+)` %(pending%)"
queue_turns({
  { steps = {
    { text = "I'll write the greeting with bash." },
    { tool_call = { name = "bash", input = { label = "write greeting.txt",
      command = "printf 'hello from bash\\n' > greeting.txt && cat greeting.txt" } } },
  } },
  { steps = { { text = "greeting.txt now says hello." } } },
})
-- The user types into the empty @You: the reply left.
local last = vim.api.nvim_buf_line_count(send)
local last_empty = vim.api.nvim_buf_get_lines(send, last - 1, last, false)[1] == ""
vim.api.nvim_buf_set_lines(send, last_empty and last - 1 or last, last, false, { "Put a greeting in greeting.txt." })
notified = {}
press("<C-]>")
local tool_id = nil
check(wait(30000, function()
  tool_id = text(send):match(tool_line)
  return tool_id ~= nil
end), "a reply with a tool call leaves its placeholder pending in the buffer", text(send))
check(read_file(chats .. "/greeting.txt") == nil, "the tool has not run before it is approved")
local offered_send = {}
choose_code_action("Approve `" .. tostring(tool_id) .. "`", offered_send)
vim.api.nvim_win_set_cursor(0, { line_of(send, "**Tool Result:** `" .. tostring(tool_id) .. "`"), 0 })
vim.lsp.buf.code_action()
local function tool_cycle_done()
  local t = text(send)
  return t:find("**Tool Result:** `" .. tostring(tool_id) .. "`\n```\nhello from bash\n```", 1, true) ~= nil
    and t:find("@Assistant:\ngreeting.txt now says hello.\n\n@You:", 1, true) ~= nil
    and ends_with_empty_you(send)
end
progress_seen = {}
check(wait(30000, function()
  note_progress()
  return tool_cycle_done()
end),
  "approving it through the code action runs the tool; its result and the next reply land, then an empty @You:",
  text(send))
progress_titles = table.concat(vim.tbl_keys(progress_seen), "\n")
-- The server names the running tool by its name.
check(progress_titles:find("send.chat: running bash", 1, true) ~= nil,
  "while the tool runs, Neovim's progress says so (running bash)", progress_titles)
check(read_file(chats .. "/greeting.txt") == "hello from bash\n", "the tool ran in the chat's directory",
  tostring(read_file(chats .. "/greeting.txt")))
-- The diagnostics of the last text are published just after it (those of the text before may
-- still show the pending placeholder): wait for them.
local errors = {}
wait(5000, function()
  errors = vim.tbl_filter(function(d) return d.severity == vim.diagnostic.severity.ERROR end, vim.diagnostic.get(send))
  return #errors == 0
end)
check(#errors == 0 and notified_with("failed") == nil, "the buffer is a valid chat (no error diagnostic, no failure told)",
  vim.inspect(errors) .. vim.inspect(notified))
-- The last reply is in the buffer a moment before the engine has wound down: ask until it is idle.
local status_told = nil
for _ = 1, 50 do
  notified = {}
  press("<leader>fs")
  wait(5000, function() return notified_with("flemmad: send.chat: ") ~= nil end)
  status_told = notified_with("flemmad: send.chat: ")
  if status_told == nil or status_told:find("send.chat: idle", 1, true) ~= nil then
    break
  end
  vim.wait(100)
end
check(status_told ~= nil and status_told:find("send.chat: idle", 1, true) ~= nil
    and status_told:find(" input, %d+ output tokens") ~= nil,
  "<leader>fs tells the chat's status: idle, and the tokens of its requests", tostring(status_told))

if not send_only then
-- 9. The key maps reach the server with the buffer's URI: the tool is done, so the server
-- answers that nothing runs in that file, and the user is told.
vim.cmd("buffer " .. bufnr)
vim.api.nvim_win_set_cursor(0, { line_of(bufnr, "**Tool Use:** `bash` (`toolu_01BBB`)"), 0 })
notified = {}
press("<M-b>")
check(wait(10000, function()
  local told = notified_with("flemmad: `flemma.background` failed: nothing runs for ")
  return told ~= nil and told:find("tools.chat: there is no running tool to move to the background", 1, true) ~= nil
end), "<M-b> sends flemma.background [uri, id]; why the server refused it for a finished tool is told",
  vim.inspect(notified))
check(#vim.tbl_filter(function(m) return m:find("failed", 1, true) ~= nil end, notified) == 1,
  "once (the server says it; the client does not repeat it)", vim.inspect(notified))

end

T.finish()
