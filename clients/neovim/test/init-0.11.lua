-- The set-up of docs/editors/neovim.md, "Set-up on Neovim 0.11 and later", as a user writes it
-- in init.lua; the server command comes from $FLEMMAD (smoke.sh's wrapper) where the docs name
-- ~/.cargo/bin/flemmad.
local client_dir = debug.getinfo(1, "S").source:sub(2):match("(.*/)test/[^/]*$") or "./"
vim.opt.runtimepath:append(client_dir)
require("flemmad").setup({ start = false })   -- filetype chat and the keys; no client of its own
vim.lsp.config("flemmad", {
  cmd = { vim.env.FLEMMAD or "flemmad", "lsp" },
})
vim.lsp.enable("flemmad")
