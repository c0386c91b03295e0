; inherits: markdown

; Markdown's own injections (inline Markdown, fenced code by info string, HTML) carry over, so
; ```json tool inputs and ```rhai / ```json frontmatter fences are highlighted by their language.
