-- What a conversation changed, and the way back (docs/review.md): `:Flemma changes [id]` shows
-- the diff of a call (the one at or above the cursor, else every call's) in a scratch split;
-- `:Flemma rewind {id}` puts the files back as they were before the call and cuts the chat
-- back to before the answer that made it (through this buffer: the server sends the cut as an
-- edit). The code lenses "N files changed · Diff · Rewind" run the same (`flemma.changes`,
-- `flemma.rewind`, the lens asking first); Neovim 0.11 shows them once refreshed, which
-- setup() does when a chat is entered and after an edit leaves insert mode.
local M = {}

local flemmad = require("flemmad")

--- The lines of a `flemma/changes` answer: each call under a `== id (tool): N files changed`
--- line, as `flemmad changes` prints them.
function M.lines(answer)
  local lines = {}
  for _, call in ipairs((answer or {}).calls or {}) do
    local files = #(call.files or {})
    table.insert(lines, string.format("== %s (%s): %d file%s changed", tostring(call.toolId),
      tostring(call.tool), files, files == 1 and "" or "s"))
    for _, line in ipairs(vim.split(call.diff or "", "\n", { plain = true, trimempty = true })) do
      table.insert(lines, line)
    end
  end
  if #lines == 0 then
    lines = { "(no call of this chat changed the project's files)" }
  end
  return lines
end

--- Shows what the call `id` of the chat `bufnr` changed (every call's when nil) in a scratch
--- split (filetype diff).
function M.show(bufnr, id)
  flemmad.ask("flemma.changes", bufnr, id and { id } or {}, function(answer)
    flemmad.scratch_split("flemma-changes://" .. (id or "all"), M.lines(answer), "diff")
  end)
end

--- Puts the files back as they were before the call `id` and cuts the chat `bufnr` back to
--- before the answer that made it; says what happened.
function M.rewind(bufnr, id)
  flemmad.ask("flemma.rewind", bufnr, { id, true, true }, function(answer)
    flemmad.notify(tostring((answer or {}).message or "rewound"))
  end)
end

function M.setup()
  vim.lsp.commands["flemma.changes"] = function(command, ctx)
    local arguments = command.arguments or {}
    local chat = arguments[1] and vim.uri_to_bufnr(arguments[1]) or ctx.bufnr
    M.show(chat, arguments[2])
  end
  vim.lsp.commands["flemma.rewind"] = function(command, ctx)
    local arguments = command.arguments or {}
    local chat = arguments[1] and vim.uri_to_bufnr(arguments[1]) or ctx.bufnr
    local id = arguments[2]
    if id == nil then
      return
    end
    local asked = "Put the files back as they were before `" .. id
      .. "` and cut the chat back to before its answer?"
    if vim.fn.confirm(asked, "&Rewind\n&Cancel", 2) == 1 then
      M.rewind(chat, id)
    end
  end
  if vim.fn.has("nvim-0.11") == 1 then
    local group = vim.api.nvim_create_augroup("flemmad.codelens", { clear = true })
    vim.api.nvim_create_autocmd({ "LspAttach", "BufEnter", "InsertLeave" }, {
      group = group,
      pattern = "*.chat",
      callback = function(args)
        if flemmad.client(args.buf) ~= nil then
          vim.lsp.codelens.refresh({ bufnr = args.buf })
        end
      end,
    })
  end
end

return M
