-- What a chat buffer looks like (Neovim 0.11 and later): the server's semantic tokens linked to
-- the plugin's highlight groups, role rulers, a gutter on the message under the cursor, folding
-- from the server with its previews (blocks closed), inlay hints (a pending call's preview).
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

--- The lines of `bufnr` shown in its windows, with a margin: what rulers and the turn's gutter
--- are drawn for (a 10 MB chat costs what a screen costs).
local function visible(bufnr, margin)
  local first, last = math.huge, 0
  for _, win in ipairs(windows_of(bufnr)) do
    first = math.min(first, vim.fn.line("w0", win))
    last = math.max(last, vim.fn.line("w$", win))
  end
  if last == 0 then
    return 1, 0
  end
  return math.max(1, first - margin), math.min(vim.api.nvim_buf_line_count(bufnr), last + margin)
end

--- Draws the role lines in view as rulers (`─ You ───…`) over their `@Role:` text.
function M.draw_rulers(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns_rulers, 0, -1)
  if not flemmad.options().ui.rulers then
    return
  end
  local first, last = visible(bufnr, 100)
  local width = vim.o.columns
  for _, message in ipairs(messages.get(bufnr)) do
    if message.start > last then
      break
    end
    if message.start >= first then
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

-- bufnr -> the lines the turn's gutter was last drawn on ("first:last"), to skip a redraw
-- that would draw the same (most cursor moves stay in one message).
local turn_drawn = {}

--- A gutter sign on the visible lines of the message under the cursor.
function M.draw_turn(bufnr, force)
  if not flemmad.options().ui.turn then
    return
  end
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) ~= bufnr then
    return
  end
  local line = vim.api.nvim_win_get_cursor(win)[1]
  local message = messages.at(bufnr, line)
  local first, last = 1, 0
  if message then
    local top, bottom = visible(bufnr, 100)
    first, last = math.max(message.start, top), math.min(message.finish, bottom)
  end
  local key = first .. ":" .. last
  if turn_drawn[bufnr] == key and not force then
    return
  end
  turn_drawn[bufnr] = key
  vim.api.nvim_buf_clear_namespace(bufnr, ns_turn, 0, -1)
  for n = first, last do
    pcall(vim.api.nvim_buf_set_extmark, bufnr, ns_turn, n - 1, 0, {
      sign_text = "▎",
      sign_hl_group = "FlemmadTurn",
      priority = 5,
    })
  end
end

-- ---- folds -----------------------------------------------------------------------------------

--- Closes, in every window of the buffer, the blocks (thinking, tool calls and results) that
--- start at or after line `from` — what a reply just wrote, which 'foldlevel' may leave open
--- when its lines took the place of an open fold — once the buffer's messages and folds from
--- the server are of its text (it retries a few seconds while they come). A window whose
--- cursor is in a block leaves that one open.
function M.close_blocks(bufnr, from, tries)
  tries = tries or 40
  if not flemmad.options().ui.folds or not vim.api.nvim_buf_is_valid(bufnr) or M.big(bufnr) then
    return
  end
  local wins = windows_of(bufnr)
  local waiting = not messages.current(bufnr)
  if not waiting then
    for _, message in ipairs(messages.get(bufnr)) do
      for _, block in ipairs(message.finish >= from and message.blocks or {}) do
        if block.line >= from and not block.waiting then
          for _, win in ipairs(wins) do
            vim.api.nvim_win_call(win, function()
              if vim.fn.foldlevel(block.line) < 2 then
                waiting = true -- the folds are not of this text yet
              elseif vim.fn.foldclosed(block.line) == -1 then
                local cursor = vim.api.nvim_win_get_cursor(win)[1]
                pcall(vim.cmd, block.line .. "foldclose")
                if cursor ~= block.line and vim.fn.foldclosed(cursor) == block.line then
                  pcall(vim.cmd, block.line .. "foldopen")
                end
              end
            end)
          end
        end
      end
    end
  end
  if waiting and tries > 0 and #wins > 0 then
    vim.defer_fn(function()
      M.close_blocks(bufnr, from, tries - 1)
    end, 100)
  end
end

--- Window options of a chat window: folding from the server with its previews — at
--- `ui.foldlevel` 1 (Flemma's) the messages open and their blocks (thinking, tool calls and
--- results) closed, also those a reply brings; a call waiting for approval has no fold —, the
--- sign column kept (the turn's gutter does not make the text jump).
--- Whether `bufnr` is longer than `ui.max_lines` (see there).
function M.big(bufnr)
  return vim.api.nvim_buf_line_count(bufnr) > flemmad.options().ui.max_lines
end

local function window(win, bufnr)
  local ui = flemmad.options().ui
  if ui.folds and not M.big(bufnr) then
    vim.wo[win][0].foldmethod = "expr"
    vim.wo[win][0].foldexpr = "v:lua.vim.lsp.foldexpr()"
    vim.wo[win][0].foldtext = "v:lua.vim.lsp.foldtext()"
    vim.wo[win][0].foldlevel = ui.foldlevel
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
        local live = require("flemmad.live").state(args.buf)
        local engine = live and live.cycle
        if engine or not M.big(args.buf) then
          messages.schedule(args.buf, engine and 500 or 150)
        end
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI", "BufEnter" }, {
    group = group,
    callback = function(args)
      if attached[args.buf] then
        M.draw_turn(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("WinScrolled", {
    group = group,
    callback = function()
      local bufnr = vim.api.nvim_get_current_buf()
      if attached[bufnr] then
        M.draw_rulers(bufnr)
        M.draw_turn(bufnr)
      end
    end,
  })
  vim.api.nvim_create_autocmd("InsertLeave", {
    group = group,
    callback = function(args)
      if attached[args.buf] then
        messages.insert_left(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "BufWipeout", "BufUnload" }, {
    group = group,
    callback = function(args)
      if attached[args.buf] then
        attached[args.buf] = nil
        turn_drawn[args.buf] = nil
        messages.forget(args.buf)
        require("flemmad.live").detach(args.buf)
      end
    end,
  })
  messages.on_refresh(function(bufnr)
    M.draw_rulers(bufnr)
    M.draw_turn(bufnr, true)
    require("flemmad.live").draw_previews(bufnr)
  end)
end

return M
