; inherits: markdown

; Flemma .chat structure on top of Markdown. Helix parses a chat with the markdown grammar, where
; a role line or a tool header is the text of a paragraph (`inline`); the patterns below match
; whole paragraphs, so they catch the lines that stand alone (a blank line or a fence after them),
; which is how flemmad writes them: `@You:` + blank line, `**Tool Result:** `id` (pending)` +
; fence. Since Helix 25.07 later patterns win over the inherited ones.

; Role lines: @You:, @Assistant:, @System:, any other @Role:
((inline) @keyword.directive
  (#match? @keyword.directive "^@(You|Assistant|System):[ \t]*$"))
((inline) @comment
  (#match? @comment "^@[A-Za-z0-9]+:[ \t]*$")
  (#not-match? @comment "^@(You|Assistant|System):"))

; Tool and job headers, by status
((inline) @special
  (#match? @special "^\\*\\*Tool Result:\\*\\* `[^`]+` \\((.* )?(pending|status=pending)( .*)?\\)[ \t]*$"))
((inline) @keyword.control.exception
  (#match? @keyword.control.exception "^\\*\\*(Tool|Job) Result:\\*\\* `[^`]+` \\((.* )?(error|rejected|denied|aborted)( .*)?\\)[ \t]*$"))
((inline) @function
  (#match? @function "^\\*\\*Tool Use:\\*\\* `[^`]+` \\(`[^`]+`\\)"))

; Thinking blocks (an HTML block to Markdown, up to the next blank line) and the abort marker
((html_block) @comment
  (#match? @comment "^<thinking[ >/]"))
((html_block) @comment
  (#match? @comment "^<!-- flemma:aborted:"))
