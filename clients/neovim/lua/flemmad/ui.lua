-- What a chat buffer looks like (Neovim 0.11 and later): the server's semantic tokens linked to
-- the plugin's highlight groups, role rulers, a gutter on the message under the cursor, folding
-- from the server with its previews (thinking closed), inlay hints (a pending call's preview).
local M = {}

local flemmad = require("flemmad")
local messages = require("flemmad.messages")

local ns_rulers = vim.api.nvim_create_namespace("flemmad.rulers")
local ns_turn = vim.api.nvim_create_namespace("flemmad.turn")
M.ns_rulers, M.ns_turn = ns_rulers, ns_turn

--- The plugin's highlight groups and what they default to (all `default`: a colorscheme or
--- your config may set them).
M.groups = {
  FlemmadRoleUser = "Title",
  FlemmadRoleAssistant = "Statement",
  FlemmadRoleSystem = "Special",
  FlemmadRuler = "Comment",
  FlemmadTurn = "Special",
  FlemmadThinking = "Comment",
  FlemmadToolUse = "Function",
  FlemmadToolResult = "Function",
  FlemmadToolPending = "DiagnosticInfo",
  FlemmadToolApproved = "DiagnosticOk",
  FlemmadToolRejected = "DiagnosticWarn",
  FlemmadToolError = "DiagnosticError",
  FlemmadJobResult = "Function",
  FlemmadFrontmatter = "PreProc",
  FlemmadTemplate = "PreProc",
  FlemmadReference = "Include",
  FlemmadAborted = "DiagnosticError",
  FlemmadProgress = "DiagnosticWarn",
  FlemmadUsage = "PmenuSel",
  FlemmadPreview = "Comment",
  FlemmadPreviewAdd = "Added",
  FlemmadPreviewDelete = "Removed",
}

--- The server's semantic tokens (type, modifier) → the plugin's groups.
local function token_groups(ft)
  local function typemod(type, mod)
    return "@lsp.typemod." .. type .. "." .. mod .. "." .. ft
  end
  return {
    [typemod("keyword", "user")] = "FlemmadRoleUser",
    [typemod("keyword", "assistant")] = "FlemmadRoleAssistant",
    [typemod("keyword", "system")] = "FlemmadRoleSystem",
    [typemod("function", "toolUse")] = "FlemmadToolUse",
    [typemod("function", "toolResult")] = "FlemmadToolResult",
    [typemod("function", "pending")] = "FlemmadToolPending",
    [typemod("function", "approved")] = "FlemmadToolApproved",
    [typemod("function", "rejected")] = "FlemmadToolRejected",
    [typemod("function", "denied")] = "FlemmadToolError",
    [typemod("function", "aborted")] = "FlemmadToolError",
    [typemod("function", "error")] = "FlemmadToolError",
    [typemod("function", "jobResult")] = "FlemmadJobResult",
    [typemod("comment", "thinking")] = "FlemmadThinking",
    [typemod("comment", "abortMarker")] = "FlemmadAborted",
    [typemod("macro", "frontmatter")] = "FlemmadFrontmatter",
    [typemod("macro", "template")] = "FlemmadTemplate",
    [typemod("string", "reference")] = "FlemmadReference",
  }
end

local function define_highlights()
  for group, link in pairs(M.groups) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
  for group, link in pairs(token_groups(flemmad.options().filetype)) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
end

local function windows_of(bufnr)
  return vim.tbl_filter(function(win)
    return vim.api.nvim_win_is_valid(win)
  end, vim.fn.win_findbuf(bufnr))
end
M.windows_of = windows_of

-- ---- rulers and the current turn -----------------------------------------------------------

--- Draws each role line as a ruler (`─ You ───…`) over its `@Role:` text.
function M.draw_rulers(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns_rulers, 0, -1)
  if not flemmad.options().ui.rulers then
    return
  end
  local count = vim.api.nvim_buf_line_count(bufnr)
  local width = vim.o.columns
  for _, message in ipairs(messages.get(bufnr)) do
    if message.start <= count then
      local line = vim.api.nvim_buf_get_lines(bufnr, message.start - 1, message.start, false)[1] or ""
      -- Only over the role line itself (the messages may be of a slightly older text).
      if line:match("^@" .. vim.pesc(message.role) .. ":%s*$") then
        local role = "FlemmadRole" .. (({ You = "User", Assistant = "Assistant", System = "System" })[message.role] or "User")
        local label = "─ " .. message.role .. " "
        pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_rulers, message.start - 1, 0, {
          virt_text = {
            { "─ ", "FlemmadRuler" },
            { message.role, role },
            { " " .. string.rep("─", math.max(width - vim.fn.strdisplaywidth(label), 3)), "FlemmadRuler" },
          },
          virt_text_pos = "overlay",
          hl_mode = "combine",
          priority = 150,
        })
      end
    end
  end
end

--- A gutter sign on the visible lines of the message under the cursor.
function M.draw_turn(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns_turn, 0, -1)
  if not flemmad.options().ui.turn then
    return
  end
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) ~= bufnr then
    return
  end
  local line = vim.api.nvim_win_get_cursor(win)[1]
  local message = messages.at(bufnr, line)
  if message == nil then
    return
  end
  local count = vim.api.nvim_buf_line_count(bufnr)
  local top, bottom = vim.fn.line("w0", win), vim.fn.line("w$", win)
  local first = math.max(message.start, top - 100)
  local last = math.min(message.finish, bottom + 100, count)
  for n = first, last do
    pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_turn, n - 1, 0, {
      sign_text = "▎",
      sign_hl_group = "FlemmadTurn",
      priority = 5,
    })
  end
end

-- ---- folds -----------------------------------------------------------------------------------

-- bufnr -> { [identity] = true }: the blocks already closed once (a block the user opens
-- stays open); `thinking` blocks are told apart by their order in the chat.
local closed = {}

--- The blocks the options close, with their identities, in document order.
local function closable(bufnr)
  local ui = flemmad.options().ui
  local out, thinking = {}, 0
  for _, message in ipairs(messages.get(bufnr)) do
    for _, block in ipairs(message.blocks or {}) do
      local key, close = nil, false
      if block.kind == "thinking" then
        thinking = thinking + 1
        key, close = "thinking " .. thinking, ui.fold_thinking
      elseif block.kind == "use" then
        key, close = "use " .. tostring(block.id), ui.fold_tool_uses
      elseif block.kind == "result" then
        -- A call still waiting (or approved, not run) stays open: its result lands there.
        local final = block.status ~= "pending" and block.status ~= "approved"
        key, close = "result " .. tostring(block.id), ui.fold_tool_results and final
      elseif block.kind == "job" then
        key, close = "job " .. tostring(block.id), ui.fold_tool_results
      end
      if key and close then
        table.insert(out, { key = key, line = block.line })
      end
    end
  end
  return out
end

--- Closes, in every window of the buffer, the blocks the options close (thinking, tool uses,
--- tool results) that were never closed before — once the buffer's folds from the server are
--- known (it retries for a few seconds while they come).
function M.close_folds(bufnr, tries)
  tries = tries or 40
  local ui = flemmad.options().ui
  if not ui.folds or not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local done = closed[bufnr] or {}
  closed[bufnr] = done
  local wins = windows_of(bufnr)
  local waiting = not messages.current(bufnr)
  if not waiting then
    local count = vim.api.nvim_buf_line_count(bufnr)
    for _, block in ipairs(closable(bufnr)) do
      if not done[block.key] and block.line <= count then
        local ready = false
        for _, win in ipairs(wins) do
          vim.api.nvim_win_call(win, function()
            -- The folding state of the buffer is set up by the first foldexpr evaluation.
            vim.lsp.foldexpr(block.line)
            if vim.fn.foldlevel(block.line) >= 2 then
              ready = true
              if vim.fn.foldclosed(block.line) == -1 then
                pcall(vim.cmd, block.line .. "foldclose")
              end
            end
          end)
        end
        if ready then
          done[block.key] = true
        else
          waiting = true
        end
      end
    end
  end
  if waiting and tries > 0 and #wins > 0 then
    vim.defer_fn(function()
      M.close_folds(bufnr, tries - 1)
    end, 100)
  end
end

--- Window options of a chat window: folding from the server with its previews, the sign
--- column kept (the turn's gutter does not make the text jump).
local function window(win, bufnr)
  local ui = flemmad.options().ui
  if ui.folds then
    vim.wo[win][0].foldmethod = "expr"
    vim.wo[win][0].foldexpr = "v:lua.vim.lsp.foldexpr()"
    vim.wo[win][0].foldtext = "v:lua.vim.lsp.foldtext()"
    vim.wo[win][0].foldlevel = 99
    vim.wo[win][0].foldenable = true
    -- A closed fold shows its preview alone (no trail of fill characters).
    vim.api.nvim_win_call(win, function()
      vim.opt_local.fillchars:append({ fold = " " })
    end)
  end
  if ui.turn then
    vim.wo[win][0].signcolumn = "yes"
  end
  vim.b[bufnr].flemmad_window_set = true
end

-- ---- per buffer --------------------------------------------------------------------------

local attached = {}

local function on_attach(bufnr)
  if attached[bufnr] then
    return
  end
  attached[bufnr] = true
  local ui = flemmad.options().ui
  if ui.inlay_hints then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  end
  messages.refresh(bufnr)
  require("flemmad.live").attach(bufnr)
  M.close_folds(bufnr)
end

--- A chat buffer (FileType): its windows set up, and the client's features once it attaches.
function M.buffer(bufnr)
  for _, win in ipairs(windows_of(bufnr)) do
    window(win, bufnr)
  end
  local client = flemmad.client(bufnr)
  if client ~= nil and client.initialized and vim.lsp.buf_is_attached(bufnr, client.id) then
    on_attach(bufnr)
  end
end

function M.setup(group)
  define_highlights()
  local ft = flemmad.options().filetype
  vim.api.nvim_create_autocmd("ColorScheme", { group = group, callback = define_highlights })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == flemmad.options().name and vim.bo[args.buf].filetype == ft then
        on_attach(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufWinEnter", {
    group = group,
    callback = function(args)
      if vim.bo[args.buf].filetype == ft then
        window(vim.api.nvim_get_current_win(), args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("LspNotify", {
    group = group,
    callback = function(args)
      local method = args.data and args.data.method
      if attached[args.buf] and (method == "textDocument/didChange" or method == "textDocument/didOpen") then
        messages.refresh(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI", "WinScrolled", "BufEnter" }, {
    group = group,
    callback = function(args)
      if attached[args.buf] then
        M.draw_turn(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "BufWipeout", "BufUnload" }, {
    group = group,
    callback = function(args)
      if attached[args.buf] then
        attached[args.buf] = nil
        closed[args.buf] = nil
        messages.forget(args.buf)
        require("flemmad.live").detach(args.buf)
      end
    end,
  })
  messages.on_refresh(function(bufnr)
    M.draw_rulers(bufnr)
    M.draw_turn(bufnr)
    require("flemmad.live").draw_previews(bufnr)
  end)
end

return M
