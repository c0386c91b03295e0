-- A minimal Neovim configuration for flemmad: `nvim -u clients/neovim/init.lua notes.chat`.
-- In your own config, put clients/neovim on 'runtimepath' and call require("flemmad").setup().
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
vim.opt.runtimepath:prepend(here)
require("flemmad").setup({
  cmd = vim.env.FLEMMAD and { vim.env.FLEMMAD, "lsp" } or nil,
})
