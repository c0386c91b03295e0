-- Headless test of what a conversation changed and the way back on Neovim 0.11 (run by
-- smoke.sh; docs/review.md, docs/editors/neovim.md): a pending `write` approved and run, then
-- the code lens "1 file changed" on its answer, `:Flemma changes` showing its diff in a scratch
-- split, and `:Flemma rewind` putting the file back byte for byte and cutting the chat back
-- through the buffer.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local T = dofile(here .. "helpers.lua")
local check, wait, text = T.check, T.wait, T.text


local BEFORE = "1\n2\n3\n"

local chat = T.open_chat("rewind.chat")

-- 1. The pending write approved: it runs (a checkpoint before and after it), the model answers.
T.queue_turns({ { steps = { { text = "Numbered in words." } } } })
vim.cmd("Flemma approve toolu_01RW")
check(wait(30000, function()
  return text(chat):find("Numbered in words.", 1, true) ~= nil
end), "the call runs and the model answers", text(chat))
check(T.read_file(vim.env.CHATS .. "/words.txt") == "one\n2\n3\n", "the file was written",
  T.read_file(vim.env.CHATS .. "/words.txt"))

-- 2. The lens on the answer that made the call.
local answer_line = T.line_of(chat, "@Assistant:")
local lens = nil
check(wait(10000, function()
  vim.lsp.codelens.refresh({ bufnr = chat })
  vim.wait(100)
  for _, l in ipairs(vim.lsp.codelens.get(chat)) do
    if l.command and l.command.title == "1 file changed" then
      lens = l
      return true
    end
  end
  return false
end), "a lens \"1 file changed\" on the answer", vim.inspect(vim.lsp.codelens.get(chat)))
if lens ~= nil then
  check(lens.range.start.line == answer_line - 1, "on its role line", lens.range.start.line)
  check(lens.command.command == "flemma.changes", "it runs flemma.changes", lens.command.command)
end

-- 3. `:Flemma changes` shows the call's diff in a scratch split.
vim.cmd("Flemma changes toolu_01RW")
local scratch = nil
check(wait(10000, function()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):find("flemma-changes://toolu_01RW", 1, true) then
      scratch = b
      return true
    end
  end
  return false
end), ":Flemma changes opens the diff")
if scratch ~= nil then
  local shown = text(scratch)
  check(shown:find("== toolu_01RW (write): 1 file changed", 1, true) ~= nil
    and shown:find("\n-1\n+one\n", 1, true) ~= nil, "it is the call's diff", shown)
  check(vim.bo[scratch].filetype == "diff" and not vim.bo[scratch].modifiable,
    "the diff is a read-only diff buffer", vim.bo[scratch].filetype)
  vim.api.nvim_win_close(vim.fn.bufwinid(scratch), true)
end

-- `:Flemma messages` shows what flemmad said, in the same kind of scratch split.
vim.api.nvim_set_current_buf(chat)
vim.cmd("Flemma messages")
local messages = vim.api.nvim_get_current_buf()
check(vim.api.nvim_buf_get_name(messages):find("flemmad messages", 1, true) ~= nil
  and vim.bo[messages].buftype == "nofile" and #text(messages) > 0,
  ":Flemma messages opens the messages", vim.api.nvim_buf_get_name(messages))
vim.api.nvim_win_close(vim.fn.bufwinid(messages), true)

-- 4. `:Flemma rewind`: the file back byte for byte, the chat cut back in the buffer.
vim.api.nvim_set_current_buf(chat)
vim.cmd("Flemma rewind toolu_01RW")
check(wait(10000, function()
  return T.read_file(vim.env.CHATS .. "/words.txt") == BEFORE
end), "the file is as it was", T.read_file(vim.env.CHATS .. "/words.txt"))
check(wait(10000, function()
  return text(chat):find("@Assistant:", 1, true) == nil
end), "the chat is cut back to before the answer", text(chat))
check(text(chat):find("Number the lines in words.", 1, true) ~= nil, "the question stays", text(chat))
check(vim.v.errmsg == "", "no error message was given (v:errmsg)", vim.v.errmsg)
T.finish()
