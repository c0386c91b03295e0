; inherits: markdown

; Flemma .chat structure on top of Markdown. Helix parses a chat with the markdown grammar, where
; a role line or a tool header is the text of a paragraph (`inline`), and a capture colours a
; whole node: so these patterns match paragraphs that are only a role line (a blank line after
; it), only a header (a fence after it, as flemmad writes them), or `@You:` + a result header.
; A role line followed directly by text stays plain Markdown. Since Helix 25.07 later patterns
; win over the inherited ones.

; Role lines: @You:, @Assistant:, @System:, any other @Role:
((inline) @keyword.directive
  (#match? @keyword.directive "^@(You|Assistant|System):[ \t]*$"))
((inline) @comment
  (#match? @comment "^@[A-Za-z0-9]+:[ \t]*$")
  (#not-match? @comment "^@(You|Assistant|System):"))

; Tool and job headers, by status
((inline) @special
  (#match? @special "^(@You:[ \t]*\n)?\\*\\*Tool Result:\\*\\* `[^`]+` \\((.* )?(pending|status=pending)( .*)?\\)[ \t]*$"))
((inline) @keyword.control.exception
  (#match? @keyword.control.exception "^(@You:[ \t]*\n)?\\*\\*(Tool|Job) Result:\\*\\* `[^`]+` \\((.* )?(error|rejected|denied|aborted)( .*)?\\)[ \t]*$"))
((inline) @function
  (#match? @function "^\\*\\*Tool Use:\\*\\* `[^`]+` \\(`[^`]+`\\)"))

; Thinking blocks (an HTML block to Markdown, up to the next blank line) and the abort marker
((html_block) @comment
  (#match? @comment "^<thinking[ >/]"))
((html_block) @comment
  (#match? @comment "^<!-- flemma:aborted:"))
