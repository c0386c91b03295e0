-- The documented 0.11 set-up (test/init-0.11.lua) with a server command that does not exist
-- (smoke.sh sets FLEMMAD to a missing path): vim.lsp.enable starts nothing and Neovim itself
-- only logs it; the set-up says so once, with the fix, however many chats are opened.
local told = {}
vim.notify = function(message, level)
  table.insert(told, { message = message, level = level })
end
local failures, checks = 0, 0
local function check(ok, what, detail)
  checks = checks + 1
  if not ok then
    failures = failures + 1
  end
  io.stdout:write((ok and "ok - " or "not ok - ") .. what .. ((not ok and detail) and ("\n  " .. tostring(detail)) or "") .. "\n")
end

vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHATS .. "/notes.chat"))
vim.cmd("edit " .. vim.fn.fnameescape(vim.env.CHATS .. "/send.chat"))
vim.wait(1000)
local clients = (vim.lsp.get_clients or vim.lsp.get_active_clients)()
check(#clients == 0, "no client starts when the command is missing", vim.inspect(clients))
local about = vim.tbl_filter(function(n)
  return n.message:find("starts nothing", 1, true) ~= nil
end, told)
check(#about == 1, "one message for two chat buffers", vim.inspect(told))
local message = about[1] and about[1].message or ""
check(message:find(vim.env.FLEMMAD, 1, true) ~= nil and message:find("not executable or not on $PATH", 1, true) ~= nil,
  "it names the command that is missing", message)
check(message:find("cargo install --path .", 1, true) ~= nil
    and message:find('vim.lsp.config("flemmad", { cmd = {', 1, true) ~= nil,
  "it says how to fix it (install flemmad, or give its path with vim.lsp.config)", message)
check(about[1] ~= nil and about[1].level == vim.log.levels.ERROR, "it is an error")
io.stdout:write(string.format("%d passed, %d failed\n", checks - failures, failures))
vim.cmd(failures > 0 and "cquit 1" or "qall!")
