-- Review before approval (issue 35, docs/review.md), Neovim 0.11 and later: a pending `write` or
-- `edit` call's proposal in a diff split, in a tab of its own — the file as it is on the left,
-- the proposed content on the right (a scratch buffer named `flemma-proposal://<tool id>/<path>`).
-- Edit the right side and `:w` it: the new content is written back into the call's input in the
-- chat (`flemma.reviseProposal`, through the server: the chat buffer gets the edit, nothing typed
-- is lost). `:Flemma review [id]` opens it, and so does the "Review changes" code action (its
-- `flemma.proposal` command is handled here, client-side). `:Flemma approve-hunks N,… [reason…]`
-- approves some hunks of the call (at the cursor, or the one the proposal buffer shows) and
-- rejects the others with the reason (`flemma.approveHunks`).
local M = {}

local flemmad = require("flemmad")

local SCHEME = "flemma-proposal://"

local function lines_of(text)
  local lines = vim.split(text, "\n", { plain = true })
  local eol = lines[#lines] == ""
  if eol then
    table.remove(lines)
  end
  return lines, eol
end

--- Shows the proposal `p` (a `flemma.proposal` answer) of call `id` of the chat buffer `chat`.
function M.show(chat, id, p)
  vim.cmd("tabnew")
  local left = vim.api.nvim_get_current_buf()
  if p.before ~= nil and p.before ~= vim.NIL then
    vim.cmd("edit " .. vim.fn.fnameescape(p.path))
    left = vim.api.nvim_get_current_buf()
  else
    -- The call creates the file: an empty side to compare with.
    vim.bo[left].buftype = "nofile"
    vim.bo[left].bufhidden = "wipe"
    vim.api.nvim_buf_set_name(left, p.path .. " (does not exist yet)")
  end
  vim.cmd("diffthis")
  vim.cmd("rightbelow vnew")
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_name(buf, SCHEME .. id .. "/" .. tostring(p.shown))
  local lines, eol = lines_of(p.after)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].fixendofline = false
  vim.bo[buf].endofline = eol
  local filetype = vim.filetype.match({ filename = p.path })
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  vim.bo[buf].modified = false
  vim.b[buf].flemmad_proposal = { chat = chat, id = id, hunks = #(p.hunks or {}) }
  vim.cmd("diffthis")
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      local content = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
      if vim.bo[buf].endofline and content ~= "" then
        content = content .. "\n"
      end
      flemmad.ask("flemma.reviseProposal", chat, { id, content }, function()
        if vim.api.nvim_buf_is_valid(buf) then
          vim.bo[buf].modified = false
        end
        flemmad.notify("the proposal of " .. id .. " is written into its call in the chat")
      end)
    end,
  })
  flemmad.notify(string.format(
    "reviewing %s: %s, %d hunk%s (:w writes your edits back into the call)",
    id, tostring(p.shown), #(p.hunks or {}), #(p.hunks or {}) == 1 and "" or "s"
  ))
  return buf
end

--- Asks for the proposal of call `id` of the chat buffer `chat` and shows it.
function M.open(chat, id)
  flemmad.ask("flemma.proposal", chat, { id }, function(p)
    if type(p) ~= "table" or type(p.after) ~= "string" then
      flemmad.notify("no proposal to review for " .. id, vim.log.levels.WARN)
      return
    end
    M.show(chat, id, p)
  end)
end

--- The chat buffer and call the current buffer is about: a proposal buffer's, else the chat's
--- pending call at or above the cursor (or `id`).
function M.target(id)
  local here = vim.api.nvim_get_current_buf()
  local shown = vim.b[here].flemmad_proposal
  if type(shown) == "table" and vim.api.nvim_buf_is_valid(shown.chat) then
    return shown.chat, id or shown.id
  end
  if vim.bo[here].filetype ~= flemmad.options().filetype then
    return nil, nil
  end
  return here, id or flemmad.tool_id_at(here, vim.api.nvim_win_get_cursor(0)[1], true)
end

--- `:Flemma approve-hunks N,… [reason…]`.
function M.approve_hunks(args)
  local spec = args[1]
  local chat, id = M.target(nil)
  if chat == nil or id == nil then
    flemmad.notify("no pending tool call here: run it in the chat on the call, or in its proposal", vim.log.levels.WARN)
    return
  end
  local hunks = {}
  for n in tostring(spec or ""):gmatch("%d+") do
    table.insert(hunks, tonumber(n))
  end
  if #hunks == 0 then
    flemmad.notify("which hunks? :Flemma approve-hunks 1,3 [why the others are rejected]", vim.log.levels.WARN)
    return
  end
  local arguments = { id, hunks }
  if #args > 1 then
    table.insert(arguments, table.concat(vim.list_slice(args, 2), " "))
  end
  flemmad.ask("flemma.approveHunks", chat, arguments, function()
    flemmad.notify(string.format("approved hunk%s %s of %s; the others are rejected",
      #hunks == 1 and "" or "s", table.concat(hunks, ", "), id))
  end)
end

--- The "Review changes" code action's command, handled here instead of by the server.
function M.setup()
  vim.lsp.commands["flemma.proposal"] = function(command, ctx)
    local arguments = command.arguments or {}
    local chat = arguments[1] and vim.uri_to_bufnr(arguments[1]) or ctx.bufnr
    if arguments[2] == nil then
      return
    end
    M.open(chat, arguments[2])
  end
end

return M
