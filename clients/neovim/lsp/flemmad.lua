-- flemmad for Neovim 0.11's `vim.lsp.config` / `vim.lsp.enable`: with clients/neovim on
-- 'runtimepath', `vim.lsp.enable("flemmad")` starts `flemmad lsp` for chat buffers. Pair it with
-- `require("flemmad").setup({ start = false })` for the filetype, the keys and the plugin's view
-- (docs/editors/neovim.md). Override any field with `vim.lsp.config("flemmad", { … })`.
return {
  cmd = { "flemmad", "lsp" },
  filetypes = { "chat" },
  root_markers = { ".git" },
  -- Sent as initializationOptions: keys of flemmad's config file. An empty Lua table would go
  -- out as a JSON array, so this is an empty object.
  init_options = vim.empty_dict(),
  -- The document's lifecycle events (`flemma/event`: progress, usage, pending calls) and the
  -- server's messages, told short (no hit-enter prompt).
  handlers = require("flemmad").handlers(),
}
