-- Headless test of review before approval on Neovim 0.11 (run by smoke.sh; docs/review.md,
-- docs/editors/neovim.md): the "Review changes" code action on a pending `write` opens a diff
-- split with the proposed content; the proposal edited and written (`:w`) goes back into the
-- call's input in the chat buffer; `:Flemma approve-hunks` in the proposal applies one hunk and
-- the result the model reads names the other and the reason.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local T = dofile(here .. "helpers.lua")
local check, wait, text = T.check, T.wait, T.text


local BEFORE = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"

local chat = T.open_chat("review.chat")

-- 1. The code action on the pending placeholder opens the diff split.
local placeholder = T.line_of(chat, "**Tool Result:** `toolu_01REV` (pending)")
vim.api.nvim_win_set_cursor(0, { placeholder, 0 })
vim.lsp.buf.code_action({
  apply = true,
  filter = function(action)
    return action.command ~= nil and action.command.command == "flemma.proposal"
  end,
})
local proposal = nil
check(wait(10000, function()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):find("flemma-proposal://toolu_01REV/notes.md", 1, true) then
      proposal = b
      return true
    end
  end
  return false
end), "\"Review changes\" opens the proposal")
if proposal == nil then
  T.finish()
end
local proposed = BEFORE:gsub("^1\n", "one\n"):gsub("12\n$", "twelve\n")
check(text(proposal) .. "\n" == proposed, "the proposal holds the proposed content", text(proposal))
local diffed = 0
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  if vim.wo[win].diff then
    diffed = diffed + 1
  end
end
check(diffed == 2, "beside the file, as a diff", diffed)
local left = vim.fn.winbufnr(vim.fn.winnr("h"))
check(vim.api.nvim_buf_get_name(left):sub(-#"notes.md") == "notes.md" and text(left) .. "\n" == BEFORE,
  "the left side is the file as it is", vim.api.nvim_buf_get_name(left))

-- 2. Edited and written: the call's input in the chat changes, the file does not.
vim.api.nvim_set_current_buf(proposal)
vim.api.nvim_buf_set_lines(proposal, 0, 1, false, { "ONE" })
vim.cmd("write")
check(wait(10000, function()
  return text(chat):find('"content": "ONE\\n2\\n3', 1, true) ~= nil
end), ":w writes the edited proposal into the call's input in the chat", text(chat))
check(not vim.bo[proposal].modified, "the proposal is no longer modified")
check(T.read_file(vim.env.CHATS .. "/notes.md") == BEFORE, "the file is unchanged")

-- 3. One hunk approved from the proposal, the other rejected with a reason.
T.queue_turns({ { steps = { { text = "Understood, line one stays a digit." } } } })
vim.cmd("Flemma approve-hunks 2 keep the digit")
check(wait(30000, function()
  return text(chat):find("Understood, line one stays a digit.", 1, true) ~= nil
end), "the call runs and the cycle goes on", text(chat))
check(T.read_file(vim.env.CHATS .. "/notes.md") == BEFORE:gsub("12\n$", "twelve\n"),
  "only the approved hunk is in the file", T.read_file(vim.env.CHATS .. "/notes.md"))
check(text(chat):find("hunk 1 rejected and not applied (the file does not have them). User feedback: keep the digit", 1, true) ~= nil,
  "the result tells the model which hunk was rejected and why", text(chat))
check(vim.v.errmsg == "", "no error message was given (v:errmsg)", vim.v.errmsg)
T.finish()
